#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What ordering costs in an ordered group (IMAGO_GROUP_CAUSAL, IMAGO_GROUP_TOTAL) against the
# plain one (each source's own order, "fifo"), measured in one run on this machine:
#
#   bench/order_cost.sh [--members "3 4"] [--orders "fifo causal total"] [--rate 2000]
#                       [--count 10000] [--size 64] [--window 256] [--idle-us 20] [--loss 0]
#                       [--fastpath] [--spread] [--keep-logs DIR]
#
# The testbed: one network namespace per member, each with a veth port on one Linux bridge
# that lives in a switch namespace of its own (multicast snooping off, so the group's
# multicast frames are flooded); the made-up links exist only inside these namespaces. Every
# member runs `imago-group all` (apps/examples/group.c) with an embedded node on
# net_af_packet over its port, every member a peer of every other: it sends --count messages
# of --size bytes at --rate per second to group 7 and receives every other member's, with
# --order fifo, causal or total, the same options otherwise, one order after another
# (ordered: --members 1,2,..,N --order-window W), its messages coalesced (flags 0: a message
# may wait up to 20 us for others to share its frame) or, with --fastpath, sent at once
# (IMAGO_FASTPATH, imago-group --fastpath). Each member checks every delivery (lost,
# duplicated, corrupted, and for causal/total the order itself: order_violations); a run
# with any of them, or a member that fails, is marked FAIL.
#
# CPU: each process runs its node in its own thread (imagod --run-to-completion: no engine
# lcore; EAL's default then is `-l 0`, so every member's one working thread is pinned to
# CPU 0, and EAL's control threads to the other CPUs), and that thread SLEEPS --idle-us
# microseconds whenever a pass moved nothing (imago-group --idle-us): the N members share
# CPU 0, and the kernel's softirqs that carry the veth and bridge frames run wherever the
# kernel runs them (the sender's CPU, in practice). --spread pins member i to CPU
# (i - 1) mod CPUs instead (explicit EAL arguments: -l CPU, --no-huge, a --vdev of its port).
# The script prints the thread affinities it found while running, and per run each CPU's
# busy share (/proc/stat: all but idle and iowait, of the whole machine: a CPU busy that the
# members do not use, CPU 1 without --spread, says something else ran, and the row is not
# clean) and NET_RX softirqs. The defaults take about 40 s.
#
# Figures per (members, order): the per-pair end-to-end delay (each message carries its send
# time, taken when imago_send_burst() took it, so time a send spent refused by the order's
# flow control is not in it; one host, one clock): each member's RESULT has p50 and p99 per
# source; the table gives the median over all (member, source) pairs of those p50 and of
# those p99, the ratio of that p50 to fifo's in the same run, and order_records per message:
# the ordering's record messages (credits; total order: ACKs) of all
# members over the group's messages (members x --count), and of the lowest id alone (total
# order's flush member). Bounded: every process gives up after 20 s without progress and is
# killed 30 s after its stream should have ended. Everything it creates (namespaces, veths,
# the bridge, processes, a temporary folder of logs) is removed at exit, even on Ctrl-C;
# --keep-logs DIR copies the logs there first. Run as root; needs build/apps/examples/imago-group.
set -euo pipefail
cd "$(dirname "$0")/.."

members_list="3 4"
orders="fifo causal total"
rate=2000
count=10000
size=64
window=256
idle_us=20
loss=0
keep_logs=""
spread=0
fastpath=()

usage() { awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; }

while [ $# -gt 0 ]; do
  case $1 in
    --members) members_list=$2; shift 2 ;;
    --orders) orders=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --window) window=$2; shift 2 ;;
    --idle-us) idle_us=$2; shift 2 ;;
    --loss) loss=$2; shift 2 ;;
    --keep-logs) keep_logs=$2; shift 2 ;;
    --spread) spread=1; shift ;;
    --fastpath) fastpath=(--fastpath); shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "order_cost: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for n in $members_list; do
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 16 ] || { echo "order_cost: --members: 2..16 each" >&2; exit 2; }
done
for o in $orders; do
  case $o in fifo | causal | total) ;; *) echo "order_cost: --orders: fifo, causal, total" >&2; exit 2 ;; esac
done
for v in "$rate" "$count" "$size" "$window" "$idle_us"; do
  [[ $v =~ ^[0-9]+$ ]] && [ "$v" -gt 0 ] || { echo "order_cost: --rate, --count, --size, --window, --idle-us: positive integers" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "order_cost: run as root (it creates network namespaces)" >&2; exit 1; }
bin=build/apps/examples/imago-group
[ -x "$bin" ] || { echo "order_cost: $bin is not built (ninja -C build)" >&2; exit 1; }
bin=$(realpath "$bin")

tag="imoc$$"          # every name made here starts with it
tmp=$(mktemp -d "/tmp/$tag.XXXXXX")
namespaces=()
pids=()  # the `timeout` wrapping each member's process

cleanup() {
  local p c ns
  for p in "${pids[@]}"; do  # a member still running: killed, and its EAL runtime folder removed
    for c in $(pgrep -P "$p" 2>/dev/null); do kill -KILL "$c" 2>/dev/null && rm -rf "/var/run/dpdk/imago-$c"; done
    kill -KILL "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf /var/run/dpdk/"$tag"-*  # --spread: EAL's runtime folders of our --file-prefix
  if [ -n "$keep_logs" ]; then mkdir -p "$keep_logs" && cp -r "$tmp"/. "$keep_logs"/ || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

add_ns() {
  ip netns add "$1"
  namespaces+=("$1")
  ip netns exec "$1" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$1" link set dev lo up
}

# bed N: namespaces $tag-n1..nN on bridge $tag-br in $tag-sw; sets port[i] and mac[i].
bed() {
  local n=$1 i sw="$tag-sw" br="$tag-br"
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  namespaces=()
  add_ns "$sw"
  ip -n "$sw" link add "$br" type bridge stp_state 0
  ip netns exec "$sw" sh -c "echo 0 > /sys/class/net/$br/bridge/multicast_snooping"
  ip -n "$sw" link set dev "$br" up
  port=() mac=()
  for i in $(seq 1 "$n"); do
    add_ns "$tag-n$i"
    port[i]="$tag-v${i}a"
    ip link add "${port[i]}" netns "$tag-n$i" type veth peer name "$tag-v${i}b" netns "$sw"
    ip -n "$sw" link set dev "$tag-v${i}b" master "$br"
    ip -n "$sw" link set dev "$tag-v${i}b" up
    ip -n "$tag-n$i" link set dev "${port[i]}" up
    mac[i]=$(ip netns exec "$tag-n$i" cat "/sys/class/net/${port[i]}/address")
  done
}

affinity=""

# cpu_snap: per CPU "busy total net_rx" (from /proc/stat and /proc/softirqs), one line each.
cpu_snap() {
  paste <(awk '/^cpu[0-9]/ { t = 0; for (i = 2; i <= NF; ++i) t += $i; print t - $5 - $6, t }' /proc/stat) \
    <(awk '/NET_RX/ { for (i = 2; i <= NF; ++i) print $i }' /proc/softirqs)
}

# run N ORDER: every member's `imago-group all`; their outputs in $tmp/N-ORDER-i.out.
run() {
  local n=$1 order=$2 i j ids limit
  ids=$(seq -s, 1 "$n")
  limit=$((count / rate + 30))
  cpu_snap >"$tmp/$n-$order.cpu0"
  local extra=()
  [ "$order" = fifo ] || extra=(--order-window "$window")
  pids=()
  for i in $(seq 1 "$n"); do
    local peers=()
    for j in $(seq 1 "$n"); do [ "$j" = "$i" ] || peers+=(--peer "$j@${mac[j]}"); done
    local fault=() eal=() iface=(--iface "${port[i]}")
    [ "$loss" = 0 ] || fault=(--fault-rx "loss=$loss,seed=$((300 + i))")
    [ "$spread" = 0 ] || eal=(-l $(((i - 1) % $(nproc))) --no-huge -m 512 --no-shconf --no-pci --no-telemetry
      --file-prefix "$tag-$i" --vdev "net_af_packet0,iface=${port[i]}" --) iface=()
    timeout -s KILL "$limit" ip netns exec "$tag-n$i" "$bin" all --group 7 --order "$order" --members "$ids" \
      "${extra[@]}" --count "$count" --size "$size" --rate "$rate" --idle-us "$idle_us" --timeout 20 \
      "${fastpath[@]}" \
      -- "${eal[@]}" "${iface[@]}" --node-id "$i" "${peers[@]}" --run-to-completion "${fault[@]}" \
      >"$tmp/$n-$order-$i.out" 2>&1 &
    pids+=($!)
  done
  if [ -z "$affinity" ]; then  # where the first member's threads may run, as found
    sleep 1
    local p
    p=$(pgrep -P "${pids[0]}" || true)
    [ -z "$p" ] || affinity=$(for t in /proc/"$p"/task/*; do
      printf '%s: CPU %s; ' "$(cat "$t/comm")" "$(awk '/Cpus_allowed_list/ {print $2}' "$t/status")"
    done 2>/dev/null)
  fi
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  pids=()
  echo "$rc" >"$tmp/$n-$order.rc"
  cpu_snap >"$tmp/$n-$order.cpu1"
}

start=$(date +%s)
for n in $members_list; do
  bed "$n"
  for order in $orders; do run "$n" "$order"; done
done

echo "order_cost: $count messages of $size bytes from each member at $rate/s, --order-window $window" \
  "(causal, total), --idle-us $idle_us, receive loss $loss, sent ${fastpath:-coalesced (flags 0)}; $(nproc) CPUs;" \
  "$(($(date +%s) - start)) s"
where="EAL -l 0: all on CPU 0"
[ "$spread" = 0 ] || where="--spread: member i on CPU (i - 1) mod $(nproc)"
echo "CPU: each member one process, its node run in its thread (--run-to-completion; $where); that" \
  "thread sleeps $idle_us us whenever a pass moved nothing. Member 1's threads: ${affinity:-not seen}"
echo
/usr/bin/python3 - "$tmp" "$count" "$members_list" "$orders" <<'EOF'
import json, statistics, sys
from pathlib import Path

tmp, count = Path(sys.argv[1]), int(sys.argv[2])
members, orders = sys.argv[3].split(), sys.argv[4].split()

def results(path):
    sub = pub = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            if r.get("role") == "sub": sub = r
            if r.get("role") == "pub": pub = r
    return pub, sub

def cpu(n, order):
    a = [l.split() for l in (tmp / f"{n}-{order}.cpu0").read_text().splitlines()]
    b = [l.split() for l in (tmp / f"{n}-{order}.cpu1").read_text().splitlines()]
    busy = " / ".join(f"{100 * (int(y[0]) - int(x[0])) / max(1, int(y[1]) - int(x[1])):.0f}" for x, y in zip(a, b))
    rx = " / ".join(f"{(int(y[2]) - int(x[2])) // 1000}k" for x, y in zip(a, b))
    return busy, rx

print("| members | order | delay p50 (us) | delay p99 (us) | p50 / fifo p50 | order_records per message "
      "(all members; lowest id) | CPU busy % (per CPU) | NET_RX softirqs (per CPU) | check |")
print("|---|---|---|---|---|---|---|---|---|")
for n in members:
    fifo_p50 = None
    for order in orders:
        p50s, p99s, records, first, why = [], [], 0, 0, []
        rc = (tmp / f"{n}-{order}.rc").read_text().strip()
        if rc != "0": why.append("a member failed")
        for i in range(1, int(n) + 1):
            pub, sub = results(tmp / f"{n}-{order}-{i}.out")
            if sub is None or pub is None:
                why.append(f"member {i}: no RESULT"); continue
            for x in sub["sources"]:
                if "delay_us" in x: p50s.append(x["delay_us"]["p50"]); p99s.append(x["delay_us"]["p99"])
                if not x["complete"] or x["delivered"] != count: why.append(f"member {i}: source {x['source']} incomplete")
            bad = {k: sub[k] for k in ("lost", "duplicated", "corrupted", "order_violations", "order_bad") if sub[k]}
            if bad: why.append(f"member {i}: {bad}")
            if len(sub["sources"]) != int(n) - 1: why.append(f"member {i}: {len(sub['sources'])} sources")
            records += sub["order_records"]
            if i == 1: first = sub["order_records"]
        busy, rx = cpu(n, order)
        if not p50s:
            print(f"| {n} | {order} | - | - | - | - | {busy} | {rx} | FAIL: {'; '.join(why)} |"); continue
        p50, p99 = statistics.median(p50s), statistics.median(p99s)
        if order == "fifo": fifo_p50 = p50
        ratio = f"{p50 / fifo_p50:.2f}" if fifo_p50 else "-"
        msgs = int(n) * count
        print(f"| {n} | {order} | {p50:.0f} | {p99:.0f} | {ratio} | {records / msgs:.3f}; {first / msgs:.3f} | "
              f"{busy} | {rx} | {'ok' if not why else 'FAIL: ' + '; '.join(why)} |")
EOF
