#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Where the cycles go in a reliable stream: imago-perf under Linux perf (Debian's linux-perf).
#
#   scripts/profile.sh [--size BYTES] [--msgs N] [--seconds S] [--via api] [--out DIR]
#
# Runs `imago-perf --pair --mode stream` (both nodes in one process over net_ring; with
# --via api through imago.h endpoints instead of the engine loop) under `perf record -g` at
# 999 Hz on every CPU, capped at --seconds [5], then writes to DIR [build/profile/<time>]:
#   perf.data     the samples;
#   symbols.txt   perf report by symbol, self time, the top 60;
#   areas.txt     the same grouped into areas (CRC32C, copies, engine send, engine receive,
#                 ACK bookkeeping, application checks, API rings and tiers, lcore loop, link,
#                 kernel, other), percentages of all samples;
#   result.json   imago-perf's RESULT line (the rate the profile was taken at).
# Prints areas.txt. Samples are cpu-clock on a VM without a PMU, so take shares, not cycles.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
need_root

size=64
msgs=20000000
secs=5
via=()
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --size) size=$2; shift 2 ;;
    --msgs) msgs=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --via) via=(--via "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

command -v perf >/dev/null || {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends linux-perf >/dev/null || die "apt-get install linux-perf failed"
}
perf_bin=$(command -v perf)
# Debian's /usr/bin/perf wants perf_<kernel>; on another kernel use the versioned one it has.
if ! "$perf_bin" --version >/dev/null 2>&1; then
  perf_bin=$(ls /usr/bin/perf_* 2>/dev/null | sort -V | tail -1)
  [ -n "$perf_bin" ] || die "no working perf binary (linux-perf)"
fi
[ -x "$IMAGO_ROOT/build/apps/imago-perf" ] || build_tree "$IMAGO_ROOT/build"
out=${out:-$IMAGO_ROOT/build/profile/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"

say "profile: imago-perf --pair --mode stream --size $size ${via[*]} for at most $secs s (output $out)"
"$perf_bin" record -q -F 999 -a -g -o "$out/perf.data" -- \
  "$IMAGO_ROOT/build/apps/imago-perf" --pair --mode stream --size "$size" --msgs "$msgs" \
  --duration "$secs" --quiet "${via[@]}" >"$out/perf-run.log" 2>&1 || die "the profiled run failed: $out/perf-run.log"
grep '^RESULT ' "$out/perf-run.log" | sed 's/^RESULT //' >"$out/result.json"
"$perf_bin" report -i "$out/perf.data" --stdio --no-children --sort sym -g none --percent-limit 0.2 2>/dev/null |
  grep -E '^ +[0-9.]+%' | head -60 >"$out/symbols.txt"

/usr/bin/python3 - "$out/symbols.txt" "$out/result.json" >"$out/areas.txt" <<'EOF'
import json, re, sys
# Areas by symbol name, first match wins.
AREAS = [
    ("CRC32C (frames and the app's message checks)", r"crc32c|long_part|short_part|fold_lanes|crc_lanes"),
    ("copies (memcpy/memmove)", r"memmove|memcpy"),
    ("application checks (build and verify messages)", r"StreamReceiver|SenderEvents|raw_fill|raw_verify|sender_task|receiver_task|take_at_b|send_some|receive_b|StreamCheck|checked_seq"),
    ("API rings and tiers", r"imago_|api::|describe_|lend_|release_sent|release_received|send_bytes|tier|handoff|rte_ring"),
    ("engine send", r"Engine::send|commit_records|build_records|commit_frame|send_new_frame|resend_lost|flush|encode|TxUnit|send_window|SendWindow"),
    ("engine receive", r"on_frame|on_data|on_unit|on_records|records_ok|RecordReader|deliver|RecvWindow|recv_window|decode|reasm"),
    ("ACK bookkeeping", r"ack|release_acked|mark_sacked|update_ack|Sack|sack"),
    ("lcore loop and timers", r"LcoreRunner|poll|next_deadline|rte_rdtsc|timer"),
    ("link (encapsulation, ports)", r"EngineLink|encap|eth_|ring_rx|ring_tx|rte_pktmbuf|mempool|FaultyPort"),
]
total = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s+([0-9.]+)%\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    pct, where, sym = float(m.group(1)), m.group(2), m.group(3).strip()
    area = "kernel" if where == "k" else next((a for a, rx in AREAS if re.search(rx, sym)), "other")
    total[area] = total.get(area, 0.0) + pct
try:
    r = json.load(open(sys.argv[2]))
    print(f"rate: {r['msgs_per_s'] / 1e6:.2f} M msgs/s of {r['size']} B ({r.get('via', 'engine')} path)")
except (OSError, ValueError, KeyError):
    print("rate: no RESULT line")
print(f"{'area':52} {'share':>7}")
for a, p in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"{a:52} {p:6.1f}%")
print(f"{'(the top 60 symbols; the rest below them)':52} {sum(total.values()):6.1f}%")
EOF
cat "$out/areas.txt"
