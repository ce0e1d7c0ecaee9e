#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Reproducer for issue #9 item 14: a SIGSEGV inside librte_net_memif.so at the end of some
# bench/compare runs (imago-perf over net_memif between two processes).
#
#   scripts/repro-memif-exit.sh [-n RUNS] [-b IMAGO_PERF] [-m "MODES"] [-e "ENDINGS"]
#                               [-g] [-T SECONDS] [-k DIR] [-v]
#
# Each run is one pair as bench/compare starts it (bench/compare_lib/runners.py): the receiver
# is the memif server on lcore 1, started first and waited for (READY); the sender is the memif
# client on lcore 0. Same EAL arguments as dts/framework/apps.py (EalConfig.argv). Runs cycle
# through MODES (raw stream pingpong) x ENDINGS:
#   tx-first   the sender stops at its --duration; the receiver polls on until its idle timeout
#              (the bench's case: the client disconnects while the server still polls)
#   rx-first   the receiver stops at its --duration while the sender still sends
#   term-tx    SIGTERM to the sender mid-run
#   term-rx    SIGTERM to the receiver mid-run
#   term-both  SIGTERM to both at the same moment mid-run (both sides close together)
# with random timings. Options:
#   -n RUNS    pairs to run [50]
#   -b PATH    the imago-perf binary [build/apps/imago-perf, or $IMAGO_PERF]
#   -g         run both processes under gdb (batch) and print the backtrace of every thread of
#              a crashing one (slow: use with few runs)
#   -T SECONDS stop starting new runs after this long [900]
#   -k DIR     keep the logs of failing runs here [a new /tmp/imago-memif-repro.XXXXXX]
#   -v         print a line for every run, not only for failing ones
#
# Last line: "memif exits: N runs, K crashes" (a crash: a process died of a signal, e.g.
# SIGSEGV: 139). Exit status: 0 with no crash, 1 with any, 2 on a usage or set-up error.
#
# The cause (DPDK 22.11's net_memif: teardown on EAL's interrupt thread under a polling lcore,
# and a server's interrupt source left registered past rte_eal_cleanup()) and imago's fix
# (holding that thread: dp::hold_intr_thread() in dataplane/port.h) are described there. On a
# 2-core VM: before the fix 11 crashes in 150 runs (6 in 36 with -g); after, 0 in 590.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNS=50
BIN=${IMAGO_PERF:-$ROOT/build/apps/imago-perf}
MODES="raw stream pingpong"
ENDINGS="tx-first rx-first term-tx term-rx term-both"
GDB=0
TIME_LIMIT=900
KEEP=""
VERBOSE=0

while getopts "n:b:m:e:gT:k:vh" opt; do
  case $opt in
    n) RUNS=$OPTARG ;;
    b) BIN=$OPTARG ;;
    m) MODES=$OPTARG ;;
    e) ENDINGS=$OPTARG ;;
    g) GDB=1 ;;
    T) TIME_LIMIT=$OPTARG ;;
    k) KEEP=$OPTARG ;;
    v) VERBOSE=1 ;;
    h) sed -n '3,29p' "$0"; exit 0 ;;
    *) exit 2 ;;
  esac
done

[ -x "$BIN" ] || { echo "repro-memif-exit: $BIN is not an executable (build it, or give -b)" >&2; exit 2; }
if [ "$GDB" = 1 ] && ! command -v gdb >/dev/null; then
  echo "repro-memif-exit: -g needs gdb (apt-get install -y gdb)" >&2
  exit 2
fi
[ -n "$KEEP" ] || KEEP=$(mktemp -d /tmp/imago-memif-repro.XXXXXX)
mkdir -p "$KEEP"
read -r -a modes <<<"$MODES"
read -r -a endings <<<"$ENDINGS"

ulimit -c 0  # a crash is seen in the exit status; no core files
TAG="imr$$"
EAL_COMMON=(--no-huge -m 512 --no-pci --no-shconf --no-telemetry "--log-level=lib.*:warning")
PROC_LIMIT=20  # seconds: a process still running then is killed (exit 124/137, not a crash)
RX_LCORE=1
[ "$(nproc)" -gt 1 ] || RX_LCORE=0

rx_pid="" tx_pid=""
cleanup() {
  # timeout(1) leads a process group of its own: this reaches the app (and gdb) behind it.
  for p in $rx_pid $tx_pid; do kill -KILL -- "-$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf /var/run/dpdk/"$TAG"-* /tmp/"$TAG"-*.sock
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# rnd LO HI: a random integer in [LO, HI].
rnd() { echo $(($1 + RANDOM % ($2 - $1 + 1))); }
# ms S: milliseconds as seconds for --duration and sleep.
ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

# launch LOG ARGS...: start imago-perf (under gdb with -g) in the background; sets $launched.
launch() {
  local log=$1
  shift
  if [ "$GDB" = 1 ]; then
    timeout -k 2 $((PROC_LIMIT + 30)) gdb -q -batch -nx \
      -ex 'set pagination off' -ex 'handle SIGTERM nostop noprint pass' \
      -ex 'handle SIGPIPE nostop noprint pass' -ex 'handle SIG34 nostop noprint pass' \
      -ex run -ex 'info threads' -ex 'thread apply all bt' --args "$BIN" "$@" >"$log" 2>&1 &
  else
    timeout -k 2 "$PROC_LIMIT" "$BIN" "$@" >"$log" 2>&1 &
  fi
  launched=$!
}

# sigterm PID: SIGTERM imago-perf (the inferior, under gdb), not its timeout/gdb wrapper.
sigterm() {
  local p=$1 c
  if [ "$GDB" = 1 ]; then
    c=$(pgrep -P "$p" 2>/dev/null | head -1)       # gdb
    [ -n "$c" ] && c=$(pgrep -P "$c" 2>/dev/null | head -1)  # the inferior
    [ -n "$c" ] && kill -TERM "$c" 2>/dev/null
  else
    c=$(pgrep -P "$p" 2>/dev/null | head -1)
    kill -TERM "${c:-$p}" 2>/dev/null
  fi
}

# crashed LOG RC: 0 when the process died of a signal (or gdb saw one).
crashed() {
  local log=$1 rc=$2
  if [ "$GDB" = 1 ]; then
    grep -qE 'received signal SIG(SEGV|BUS|ABRT|FPE|ILL)' "$log"
  else
    # 124/137: our own time limit (a hang, counted apart); 128+N otherwise: died of signal N.
    [ "$rc" -gt 128 ] && [ "$rc" -ne 137 ]
  fi
}

runs=0 crashes=0 hangs=0 failures=0
declare -A by_case=()
start=$SECONDS
for ((i = 0; i < RUNS; i++)); do
  if ((SECONDS - start >= TIME_LIMIT)); then
    echo "repro-memif-exit: time limit ${TIME_LIMIT} s reached after $runs runs"
    break
  fi
  mode=${modes[i % ${#modes[@]}]}
  ending=${endings[(i / ${#modes[@]}) % ${#endings[@]}]}
  sock=/tmp/$TAG-$i.sock
  rx_log=$KEEP/run$i-$mode-$ending-rx.log
  tx_log=$KEEP/run$i-$mode-$ending-tx.log
  msgs=100000000  # never reached: every run ends by time, idle timeout or signal
  settle_ms=$(rnd 0 300) tx_ms=$(rnd 150 450) rx_ms=5000 idle_ms=$(rnd 50 300) term_ms=$(rnd 50 350)
  case $ending in
    # The receiver's --duration runs from its READY: leave the sender time to start and connect.
    rx-first) rx_ms=$((settle_ms + $(rnd 1500 2500))); tx_ms=5000; idle_ms=5000 ;;
    term-*) tx_ms=3000; rx_ms=3000; idle_ms=5000 ;;
  esac
  # pingpong's receiver echoes; raw and stream receivers only count.
  rx_args=(-l "$RX_LCORE" "${EAL_COMMON[@]}" --file-prefix "$TAG-$i-rx"
    "--vdev=net_memif0,role=server,socket=$sock,socket-abstract=no"
    -- --mode "$mode" --role rx --msgs "$msgs" --size 64 --duration "$(ms "$rx_ms")"
    --idle-timeout-ms "$idle_ms")
  tx_args=(-l 0 "${EAL_COMMON[@]}" --file-prefix "$TAG-$i-tx"
    "--vdev=net_memif0,role=client,socket=$sock,socket-abstract=no"
    -- --mode "$mode" --role tx --msgs "$msgs" --size 64 --duration "$(ms "$tx_ms")")

  launch "$rx_log" "${rx_args[@]}"
  rx_pid=$launched
  for ((w = 0; w < 200; w++)); do  # READY within 10 s
    grep -q '^READY' "$rx_log" 2>/dev/null && break
    kill -0 "$rx_pid" 2>/dev/null || break
    sleep 0.05
  done
  sleep "$(ms "$settle_ms")"  # the bench waits 0.5 s (MEMIF_SETTLE_S); any wait will do
  launch "$tx_log" "${tx_args[@]}"
  tx_pid=$launched
  case $ending in
    term-tx|term-rx|term-both)
      for ((w = 0; w < 200; w++)); do  # the sender polling too, then the chosen moment
        grep -q '^READY' "$tx_log" 2>/dev/null && break
        kill -0 "$tx_pid" 2>/dev/null || break
        sleep 0.05
      done
      sleep "$(ms "$term_ms")"
      case $ending in
        term-tx) sigterm "$tx_pid" ;;
        term-rx) sigterm "$rx_pid" ;;
        term-both) sigterm "$rx_pid"; sigterm "$tx_pid" ;;
      esac
      ;;
  esac
  wait "$tx_pid"; tx_rc=$?
  wait "$rx_pid"; rx_rc=$?
  rx_pid="" tx_pid=""
  runs=$((runs + 1))

  bad=""
  for side in rx tx; do
    log_var=${side}_log rc_var=${side}_rc
    log=${!log_var} rc=${!rc_var}
    if crashed "$log" "$rc"; then
      bad+=" $side:crash(rc=$rc)"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      bad+=" $side:hang"
      hangs=$((hangs + 1))
    elif [ "$rc" != 0 ]; then
      bad+=" $side:rc=$rc"
      failures=$((failures + 1))
    fi
  done
  if [[ $bad == *crash* ]]; then
    crashes=$((crashes + 1))
    by_case[$mode/$ending]=$((${by_case[$mode/$ending]:-0} + 1))
  fi
  if [ -n "$bad" ]; then
    echo "run $i $mode $ending (tx ${tx_ms} ms, rx ${rx_ms} ms, idle ${idle_ms} ms, term ${term_ms} ms):$bad; logs $rx_log $tx_log"
    if [[ $bad == *crash* ]] && [ "$GDB" = 1 ]; then
      for log in "$rx_log" "$tx_log"; do
        grep -q 'received signal' "$log" && sed -n '/received signal/,$p' "$log" | head -80
      done
    fi
  else
    [ "$VERBOSE" = 1 ] && echo "run $i $mode $ending: ok"
    rm -f "$rx_log" "$tx_log"
  fi
  rm -rf /var/run/dpdk/"$TAG"-"$i"-* "$sock"
done

for k in "${!by_case[@]}"; do echo "  crashes in $k: ${by_case[$k]}"; done
echo "  hangs (killed after ${PROC_LIMIT} s): $hangs; other non-zero exits: $failures"
rmdir "$KEEP" 2>/dev/null || echo "  logs of failing runs: $KEEP"
echo "memif exits: $runs runs, $crashes crashes"
[ "$crashes" = 0 ]
