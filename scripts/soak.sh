#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Long runs, not tests (issue #9): run once, read the figures, paste them in a closing note.
#
#   scripts/soak.sh api [MINUTES]   imagod --pair with 5 % loss, 2 % reordering and 1 % duplication
#                                   injected on every port; rounds of publisher + subscriber
#                                   secondaries (every tier, copy and zero-copy) for MINUTES [60];
#                                   imagod's RSS and pool use sampled every 10 s into a CSV.
#   scripts/soak.sh count [MSGS]    imago-perf --pair stream of MSGS [10^8] messages at 20 % loss.
#   scripts/soak.sh kills [ROUNDS]  imagod --pair; ROUNDS [60] times a zero-copy publisher of
#                                   large messages (a buffer get from the big pool each, and
#                                   deliveries getting from it too) SIGKILLed 0.2 to 1.2 s into
#                                   its stream, its subscriber after it: imagod must go on
#                                   serving (its engine lcore not stopped on a pool), and its
#                                   pools come back to their baseline.
#
# Each ends with a verdict line "soak: PASS ..." or "soak: FAIL ..." and exits 0 or 1. Every
# loop is bounded in time; everything runs in this process's own EAL prefix and is stopped
# on exit. Output goes to build/logs/soak-*.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

BUILD="$IMAGO_ROOT/build"
LOGDIR="$IMAGO_LOGS/soak-$(date +%Y%m%d-%H%M%S)"
FAULTS="loss=0.05,reorder=0.02,dup=0.01"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

# result_field LINE KEY: the integer KEY of a RESULT line.
result_field() { /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1][7:]).get(sys.argv[2], ""))' "$1" "$2"; }

# One publisher/subscriber round of COUNT messages through imagod PREFIX. @return 0 when the
# subscriber got every message once, in order, intact.
pubsub_round() {
  local prefix=$1 count=$2 round=$3 zc=()
  [ $((round % 2)) -eq 1 ] && zc=(--zero-copy)
  local ex="$BUILD/apps/examples/imago-pubsub" name="soak$round"
  "$ex" sub --secondary "$prefix" --name "$name" --count "$count" --size 16-3000 --timeout 60 \
    >"$LOGDIR/sub-$round.log" 2>&1 &
  local sub=$!
  "$ex" pub --secondary "$prefix" --name "$name" --count "$count" --size 16-3000 --timeout 60 "${zc[@]}" \
    >"$LOGDIR/pub-$round.log" 2>&1
  wait "$sub"
  local r
  r=$(grep '^RESULT' "$LOGDIR/sub-$round.log" | tail -1)
  echo "round $round: $r" >>"$LOGDIR/rounds.log"
  [ -n "$r" ] && [ "$(result_field "$r" msgs_delivered)" = "$count" ] &&
    [ "$(result_field "$r" lost)$(result_field "$r" duplicated)$(result_field "$r" reordered)$(result_field "$r" corrupted)" = "0000" ]
}

# Every 10 s: seconds, imagod's RSS (KiB) and its last "pools:" line's four counts.
sample() {
  local pid=$1 log=$2 out=$3 t0=$SECONDS
  echo "t_s,rss_kib,msgs_in_use,frames_in_use,big_in_use,mbufs_in_use" >"$out"
  while kill -0 "$pid" 2>/dev/null; do
    local rss pools
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    pools=$(grep '^pools:' "$log" | tail -1 | sed 's/[a-z_]*=//g; s/pools: //; s/ /,/g')
    [ -n "$rss" ] && [ -n "$pools" ] && echo "$((SECONDS - t0)),$rss,$pools" >>"$out"
    sleep 10
  done
}

soak_api() {
  local minutes=${1:-60} prefix="soak$$" round=0 failed=0 msgs=0 per_round=2000000
  setup_hugepages 512 || die "the API soak needs hugepages (imagod's secondaries)"
  "$BUILD/apps/imagod" --pair --file-prefix "$prefix" --fault-rx "$FAULTS,seed=$$" --stats-period 10 \
    >"$LOGDIR/imagod.log" 2>&1 &
  local d=$!
  pids+=("$d")
  local t=0
  until grep -q serving "$LOGDIR/imagod.log" 2>/dev/null; do
    sleep 0.2
    t=$((t + 1))
    [ $t -lt 150 ] || die "imagod did not start: $(tail -5 "$LOGDIR/imagod.log")"
  done
  sample "$d" "$LOGDIR/imagod.log" "$LOGDIR/samples.csv" &
  pids+=($!)
  say "api soak: $minutes min, faults $FAULTS on every port, $per_round messages a round (log: $LOGDIR)"
  local end=$((SECONDS + minutes * 60))
  while [ $SECONDS -lt $end ]; do
    round=$((round + 1))
    if pubsub_round "$prefix" "$per_round" "$round"; then
      msgs=$((msgs + per_round))
    else
      failed=$((failed + 1))
      echo "round $round failed: see $LOGDIR/sub-$round.log"
    fi
    # Progress: where the run is, and imagod's latest sample (RSS KiB, pools in use).
    echo "soak: round $round done, $msgs messages verified, $failed rounds failed," \
      "$(((end - SECONDS + 59) / 60)) min left; imagod t_s,rss,pools: $(tail -1 "$LOGDIR/samples.csv")"
  done
  sleep 12  # one more statistics period with no application attached
  kill -TERM "$d"
  wait "$d"
  /usr/bin/python3 - "$LOGDIR/samples.csv" "$round" "$failed" "$msgs" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
rounds, failed, msgs = map(int, sys.argv[2:5])
if len(rows) < 4:
    print(f"soak: FAIL too few samples ({len(rows)})"); sys.exit(1)
q = max(1, len(rows) // 4)
first, last = rows[:q], rows[-q:]
def peak(rs, k): return max(int(r[k]) for r in rs)
rss_growth = peak(last, "rss_kib") - peak(first, "rss_kib")
idle = rows[-1]
idle_in_use = sum(int(idle[k]) for k in ("msgs_in_use", "frames_in_use", "big_in_use"))
print(f"samples {len(rows)} over {rows[-1]['t_s']} s; rounds {rounds} ({failed} failed), {msgs} messages verified")
print(f"imagod RSS KiB: first quarter peak {peak(first, 'rss_kib')}, last quarter peak {peak(last, 'rss_kib')}"
      f" (growth {rss_growth}), max {peak(rows, 'rss_kib')}")
for k in ("msgs_in_use", "frames_in_use", "big_in_use", "mbufs_in_use"):
    print(f"{k}: first quarter peak {peak(first, k)}, last quarter peak {peak(last, k)}, at the end {idle[k]}")
ok = failed == 0 and rss_growth <= 4096 and idle_in_use == 0
print(f"soak: {'PASS' if ok else 'FAIL'} api: {msgs} messages, 0 lost/duplicated/reordered/corrupted in"
      f" {rounds - failed} of {rounds} rounds, RSS growth {rss_growth} KiB, pools in use at the end {idle_in_use}")
sys.exit(0 if ok else 1)
EOF
}

soak_count() {
  local msgs=${1:-100000000}
  say "count soak: $msgs messages at 20 % loss through the engine (--pair) (log: $LOGDIR)"
  "$BUILD/apps/imago-perf" --pair --mode stream --msgs "$msgs" --size 64 --loss 0.2 --seed $$ \
    --duration 3600 --stats-period 30 | tee "$LOGDIR/count.log"
  local r
  r=$(grep '^RESULT' "$LOGDIR/count.log" | tail -1)
  local bad
  bad="$(result_field "$r" lost)$(result_field "$r" duplicated)$(result_field "$r" reordered)$(result_field "$r" corrupted)"
  if [ "$(result_field "$r" msgs_delivered)" = "$msgs" ] && [ "$bad" = "0000" ]; then
    echo "soak: PASS count: $msgs delivered, 0 lost/duplicated/reordered/corrupted"
  else
    echo "soak: FAIL count: $r"
    return 1
  fi
}

# imagod's last "pools:" line's three message-pool counts, "msgs frames big".
pools_in_use() { grep '^pools:' "$1" | tail -1 | sed 's/[a-z_]*=//g; s/pools: //' | cut -d' ' -f1-3; }

soak_kills() {
  local rounds=${1:-60} prefix="kill$$" round=0 wedged=0
  setup_hugepages 512 || die "the kill soak needs hugepages (imagod's secondaries)"
  "$BUILD/apps/imagod" --pair --file-prefix "$prefix" --stats-period 1 >"$LOGDIR/imagod.log" 2>&1 &
  local d=$! t=0
  pids+=("$d")
  until grep -q serving "$LOGDIR/imagod.log" 2>/dev/null; do
    sleep 0.2
    t=$((t + 1))
    [ $t -lt 150 ] || die "imagod did not start: $(tail -5 "$LOGDIR/imagod.log")"
  done
  sleep 1.5
  local base
  base=$(pools_in_use "$LOGDIR/imagod.log")
  say "kill soak: $rounds rounds of a zero-copy publisher of 2100-9000 B SIGKILLed mid-stream (log: $LOGDIR)"
  local ex="$BUILD/apps/examples/imago-pubsub"
  while [ "$round" -lt "$rounds" ] && kill -0 "$d" 2>/dev/null; do
    round=$((round + 1))
    "$ex" sub --secondary "$prefix" --name "k$round" --count 1000000000 --size 2100-9000 --timeout 30 \
      >"$LOGDIR/sub-$round.log" 2>&1 &
    local sub=$!
    "$ex" pub --secondary "$prefix" --name "k$round" --count 1000000000 --size 2100-9000 --timeout 30 \
      --zero-copy >"$LOGDIR/pub-$round.log" 2>&1 &
    local pub=$! waited=0
    until grep -q "peer ready" "$LOGDIR/pub-$round.log" 2>/dev/null || [ $waited -ge 300 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    sleep "0.$((2 + RANDOM % 10))"
    kill -KILL "$pub" 2>/dev/null
    sleep 0.1
    kill -KILL "$sub" 2>/dev/null
    wait "$pub" "$sub" 2>/dev/null
    # imagod reclaims both within a statistics period or two; an engine lcore stopped on a
    # pool makes it say so after 10 s and exit 3.
    sleep 2.5
    if grep -q "has not run for" "$LOGDIR/imagod.log"; then
      wedged=1
      echo "round $round: imagod's engine lcore stopped: $(grep 'has not run for' "$LOGDIR/imagod.log" | head -1)"
      break
    fi
  done
  sleep 12  # a whole stop-detection period and more with nothing attached
  local alive=0 end=""
  kill -0 "$d" 2>/dev/null && alive=1
  grep -q "has not run for" "$LOGDIR/imagod.log" && wedged=1
  end=$(pools_in_use "$LOGDIR/imagod.log")
  kill -TERM "$d" 2>/dev/null
  wait "$d" 2>/dev/null
  if [ "$alive" = 1 ] && [ "$wedged" = 0 ] && [ "$end" = "$base" ]; then
    echo "soak: PASS kills: $round rounds, imagod serving throughout, pools in use $end (baseline $base)"
  else
    echo "soak: FAIL kills: $round rounds, imagod alive $alive, engine stopped $wedged, pools in use $end (baseline $base)"
    return 1
  fi
}

need_root
mkdir -p "$LOGDIR"
[ -x "$BUILD/apps/imagod" ] || build_tree "$BUILD"
case "${1:-}" in
  api) soak_api "${2:-60}" ;;
  count) soak_count "${2:-100000000}" ;;
  kills) soak_kills "${2:-60}" ;;
  *) die "usage: scripts/soak.sh api [MINUTES] | count [MSGS] | kills [ROUNDS]" ;;
esac
