#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ACK- and NACK-based streams side by side (issue 12, NASA KSC's two stream kinds), in one
# process on the embedded --pair (two nodes over a crossed net_ring pair, engines on one
# lcore, the application thread spinning), with loss injected on every receive queue:
#
#   bench/nack_streams.sh [MESSAGES] [SIZE] [LOSSES...]     (defaults: 300000 64 0 0.001 0.01)
#
# Rows: the unicast ACK stream (imago-pubsub both), a group stream with ACKs (imago-group
# both) and the same group stream NACK-based (imago-group both --nack). Figures: messages per
# second at the receiver (first to last message delivered), repairs, units reported lost (a
# NACK stream's gap older than --group-nack-hold-ms), and the NACK/ACK ratio of the group
# stream in the same run. Needs a build in build/ (scripts/demo.sh or scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
msgs=${1:-300000}
size=${2:-64}
shift $(($# > 2 ? 2 : $#))
losses=("$@")
[ ${#losses[@]} -gt 0 ] || losses=(0 0.001 0.01)
ex=build/apps/examples
for b in "$ex/imago-group" "$ex/imago-pubsub"; do
  [ -x "$b" ] || { echo "nack_streams: $b is not built (run scripts/demo.sh first)" >&2; exit 1; }
done

# run LABEL LOSS COMMAND...: the receiver's RESULT line as "msgs_per_s repairs reported lost".
run() {
  local loss=$1
  shift
  timeout 120 "$@" --count "$msgs" --size "$size" --timeout 20 -- --pair --fault-rx "loss=$loss,seed=5" 2>/dev/null |
    /usr/bin/python3 -c '
import json, sys
sub = pub = None
for line in sys.stdin:
    if line.startswith("RESULT "):
        r = json.loads(line[7:])
        if r.get("role") in ("sub", "both"): sub = r
        if r.get("role") == "pub": pub = r
if sub is None:
    print("nan - - -"); sys.exit()
rep = (pub or {}).get("repair_frames", "-")
print("%.0f %s %s %s" % (sub["msgs_per_s"], rep, sub.get("lost_reported", 0), sub.get("lost", 0)))'
}

printf '| loss | stream | msgs/s at the receiver | repair frames | units reported lost | messages lost |\n'
printf '|---|---|---|---|---|---|\n'
for loss in "${losses[@]}"; do
  read -r u _ _ ul < <(run "$loss" "$ex/imago-pubsub" both)
  read -r a ar arep al < <(run "$loss" "$ex/imago-group" both)
  read -r n nr nrep nl < <(run "$loss" "$ex/imago-group" both --nack)
  printf '| %s | unicast, ACK | %s | - | - | %s |\n' "$loss" "$u" "$ul"
  printf '| %s | group, ACK | %s | %s | %s | %s |\n' "$loss" "$a" "$ar" "$arep" "$al"
  printf '| %s | group, NACK | %s (%.2fx the group ACK stream) | %s | %s | %s |\n' "$loss" "$n" \
    "$(/usr/bin/python3 -c "print($n / $a if $a else 0)")" "$nr" "$nrep" "$nl"
done
