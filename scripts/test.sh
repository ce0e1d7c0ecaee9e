#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quick start 2: install, build, and run every test: the simulation's full seed count and
# benchmark smoke runs in the optimized tree; unit, simulation and EAL integration tests under
# ASan+UBSan; a fuzz smoke run of every fuzz target; and the end-to-end DTS suites over network
# namespaces. Ends with one "N passed, N failed" line.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
need_root
install_packages

# The optimized tree runs these suites: the simulation's full seed count, the benchmarks'
# smoke runs and what needs the programs. The unit and EAL tests run from the sanitized tree.
main_suites=(sim bench-smoke apps)

# main_targets DIR SUITE...: the ninja targets of configured tree DIR but the test programs,
# and those the tests of SUITE... run. The other test programs are built once, in the
# sanitized tree, not twice: they were half of this tree's build.
main_targets() {
  local dir=$1
  shift
  /usr/bin/python3 - "$dir" "$@" <<'PY'
import json, os, subprocess, sys
d, suites = sys.argv[1], {"imago:" + s for s in sys.argv[2:]}
intro = lambda what: json.loads(subprocess.check_output(["meson", "introspect", d, what]))
wanted = {i for t in intro("--tests") if suites & set(t["suite"]) for i in t["depends"]}
for t in intro("--targets"):
    if "/tests/" not in t["defined_in"].replace(os.sep, "/") or t["id"] in wanted:
        print("\n".join(os.path.relpath(f, d) for f in t["filename"]))
PY
}
setup_tree "$IMAGO_ROOT/build"
mapfile -t targets < <(main_targets "$IMAGO_ROOT/build" "${main_suites[@]}")
[ ${#targets[@]} -gt 0 ] || die "no targets in $IMAGO_ROOT/build"
build_targets "$IMAGO_ROOT/build" "${targets[@]}"
# imagod and its secondary processes (the API's multi-process tests) need hugepages; the
# tests that need them say why they skip when this fails.
setup_hugepages 512 || true
# -O1 and line tables only (-g1): the sanitizers' own advice, and half the compile time of
# -O2 -g (the sanitized build was 17 of the 39 minutes of this script on a 2-core machine);
# the tests under it take as long as before. No programs (-Dapps=false): no test runs them.
build_tree "$IMAGO_ROOT/build-asan" -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbenchmarks=false -Dapps=false -Doptimization=1 -Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1

passed=0
failed=0
failed_parts=()

# count_meson LOG: add meson's "Ok:" / "Fail:" totals from a test run's output.
count_meson() {
  local ok fail
  ok=$(grep -E '^Ok: ' "$1" | awk '{s+=$2} END {print s+0}')
  fail=$(grep -E '^(Fail|Timeout|Unexpected Pass):' "$1" | awk '{s+=$NF} END {print s+0}')
  passed=$((passed + ok))
  failed=$((failed + fail))
}

# run_part NAME COMMAND...: run one part, keep its log, count it.
run_part() {
  local name=$1
  shift
  local log="$IMAGO_LOGS/test-$name.log"
  say "test: $name"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if [[ $name == meson-* ]]; then count_meson "$log"; fi
  if [ "$rc" -ne 0 ]; then
    failed_parts+=("$name")
    # a runner that died before counting still counts as a failure
    if ! grep -qE '^(Ok|Fail): ' "$log" && [[ $name == meson-* ]]; then failed=$((failed + 1)); fi
  fi
}

cd "$IMAGO_ROOT"
run_part meson-release meson test -C build --no-rebuild --print-errorlogs \
  "${main_suites[@]/#/--suite=}"
# Unit, simulation and EAL suites under ASan + UBSan (leak checking on); any report fails the
# run. The simulation runs 100 seeds here: the release run above covers the full seed count.
IMAGO_SIM_SEEDS=100 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run_part meson-asan meson test -C build-asan --print-errorlogs --suite unit --suite sim --suite eal

# Each fuzz target for 10 s from its kept corpus with a fixed seed (scripts/fuzz.sh; longer,
# freely seeded runs by hand). It ends with "fuzz: N passed, N failed", one per target:
# counted like the DTS tests below.
fuzz_log="$IMAGO_LOGS/test-fuzz-smoke.log"
IMAGO_FUZZ_SEED=1 run_part fuzz-smoke "$IMAGO_ROOT/scripts/fuzz.sh" 10
fuzz_counts=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' "$fuzz_log" | tail -1)
fuzz_passed=$(awk '{print $2}' <<<"$fuzz_counts")
fuzz_failed=$(awk '{print $4}' <<<"$fuzz_counts")
passed=$((passed + ${fuzz_passed:-0}))
failed=$((failed + ${fuzz_failed:-0}))
if [ -z "$fuzz_counts" ]; then
  failed_parts+=("fuzz-smoke ran no target")
  failed=$((failed + 1))
fi

dts_log="$IMAGO_LOGS/test-dts.log"
run_part dts /usr/bin/python3 -m pytest "$IMAGO_ROOT/dts" -v -rs --durations=12
dts_passed=$(grep -oE '[0-9]+ passed' "$dts_log" | tail -1 | awk '{print $1+0}')
dts_failed=$(grep -oE '[0-9]+ (failed|error)' "$dts_log" | awk '{s+=$1} END {print s+0}')
passed=$((passed + ${dts_passed:-0}))
failed=$((failed + ${dts_failed:-0}))
if [ "${dts_passed:-0}" -eq 0 ] && [ "$dts_failed" -eq 0 ]; then
  failed_parts+=("dts ran no test")
  failed=$((failed + 1))
fi

echo
if [ ${#failed_parts[@]} -gt 0 ]; then
  say "failed parts: ${failed_parts[*]} (logs in $IMAGO_LOGS)"
  [ "$failed" -gt 0 ] || failed=1
fi
echo "imago: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
