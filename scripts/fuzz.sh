#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Fuzz imago with libFuzzer under ASan + UBSan (clang-14):
#
#   scripts/fuzz.sh [--merge] [SECONDS_PER_TARGET] [TARGET...]
#
# Builds the fuzz tree build-fuzz (-Dfuzz=true: the pure libraries and tests/fuzz only), then
# runs each TARGET (default: all of tests/fuzz/*_fuzz.cc) for SECONDS_PER_TARGET (default 60)
# from its kept corpus tests/fuzz/corpus/<target>/. New interesting inputs go to a scratch
# corpus, build-fuzz/fuzz-work/<target>/corpus/ (kept between runs), never into the repository
# unless --merge: then, after the run, the inputs that reach new edges are merged (named by
# their SHA-1) into tests/fuzz/corpus/<target>/. Crashes, leaks, timeouts and
# out-of-memory inputs land in build-fuzz/fuzz-work/<target>/artifacts/ (emptied at each run);
# replay one with build-fuzz/tests/fuzz/<target>_fuzz FILE.
#
# The targets run side by side, one a core (IMAGO_FUZZ_JOBS=N to change it).
# IMAGO_FUZZ_SEED=N fixes libFuzzer's seed (the test command's smoke run uses 1, so it explores
# the same way each time); unset, each run draws its own.
#
# Prints per target the executions done and the crashes found, then one line
# "fuzz: N passed, N failed" (a target passes with no crash); exits non-zero on any crash.
# Do not pause a run (SIGSTOP): libFuzzer's 25 s -timeout counts wall time, so the input it
# was on when resumed is reported as a hang (replay it to see it is not).
set -uo pipefail
source "$(dirname "$0")/lib.sh"

merge=0
if [ "${1:-}" = --merge ]; then
  merge=1
  shift
fi
secs=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
case ${1:-} in -h | --help)
  sed -n '3,23p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
  ;;
esac

install_packages
tree="$IMAGO_ROOT/build-fuzz"
export CC=clang-14 CXX=clang++-14
build_tree "$tree" -Dfuzz=true -Dtests=false -Dbenchmarks=false \
  -Db_sanitize=address,undefined -Db_lundef=false

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$IMAGO_ROOT"/tests/fuzz/*_fuzz.cc; do
    f=$(basename "$f")
    targets+=("${f%_fuzz.cc}")
  done
fi

# Any sanitizer report is a crash; leaks too. libFuzzer's own limits: a unit that runs over
# 25 s is a hang, over 2 GiB resident is out of memory.
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

seed=${IMAGO_FUZZ_SEED:-0}  # 0: libFuzzer draws one

# fuzz_one TARGET: run one target, print what it found; exits 1 on a crash.
fuzz_one() {
  local t=$1
  local exe="$tree/tests/fuzz/${t}_fuzz"
  local seeds="$IMAGO_ROOT/tests/fuzz/corpus/$t"
  if [ ! -x "$exe" ] || [ ! -d "$seeds" ]; then
    echo "fuzz: $t: no such target (tests/fuzz/${t}_fuzz.cc and tests/fuzz/corpus/$t/)"
    return 1
  fi
  local work="$tree/fuzz-work/$t"
  rm -rf "$work/artifacts"
  mkdir -p "$work/corpus" "$work/artifacts" "$IMAGO_LOGS"
  local log="$IMAGO_LOGS/fuzz-$t.log"
  # New inputs go to the first corpus folder: the scratch one.
  "$exe" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 -seed="$seed" \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds" </dev/null >"$log" 2>&1
  local rc=$?
  local execs rate crashes
  execs=$(grep -a -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep -a -E '^stat::average_exec_per_sec:' "$log" | awk '{print $2}' | tail -1)
  crashes=$(find "$work/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  # Died without an artifact: a crash too, unless someone stopped it (SIGINT: libFuzzer says so).
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && ! grep -q 'libFuzzer: run interrupted' "$log"; then crashes=1; fi
  echo "fuzz: $t: ${execs:-0} executions (${rate:-0}/s), $crashes crashes"
  if [ "$crashes" -ne 0 ]; then
    grep -E '==fuzz==|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" | head -5 | sed 's/^/  /'
    find "$work/artifacts" -type f ! -name 'slow-unit-*' | head -3 | sed "s|^|  replay: $exe |"
  fi
  if [ "$merge" -eq 1 ]; then
    # New edges only (not hit counts): the kept corpora stay a few hundred small files.
    "$exe" -merge=1 -use_counters=0 -artifact_prefix="$work/artifacts/" "$seeds" "$work/corpus" \
      </dev/null >>"$log" 2>&1 ||
      echo "fuzz: $t: merge failed (log: $log)"
    echo "fuzz: $t: corpus now $(find "$seeds" -type f | wc -l) files, $(du -sh "$seeds" | cut -f1)"
  fi
  [ "$crashes" -eq 0 ]
}

# The targets run side by side, one a core (IMAGO_FUZZ_JOBS to change it): each is one
# single-threaded process, and one at a time left a core idle for the whole run.
jobs_max=${IMAGO_FUZZ_JOBS:-$(nproc)}
mkdir -p "$tree/fuzz-work"
pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  say "fuzz: $t for ${secs} s (log: $IMAGO_LOGS/fuzz-$t.log)"
  fuzz_one "$t" >"$tree/fuzz-work/$t.report" 2>&1 &
  pids+=($!)
done
passed=0
failed=0
for i in "${!targets[@]}"; do
  if wait "${pids[$i]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  cat "$tree/fuzz-work/${targets[$i]}.report"
done

echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
