#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Quick start 1: install, build, and run the demo: two imago nodes in one process over a
# virtual link (net_ring), no hugepages needed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_root
install_packages
build_tree "$IMAGO_ROOT/build"

cat <<'TXT'

==> The demo
Two imago nodes, A and B, run inside this one process on two lcores, joined by a virtual
link made of two DPDK rings (the net_ring driver). No hugepages, no NIC needed. Between A
and its port sits imago's fault layer, set to drop 10% of frames at random (seed 7, so
every run drops the same ones).

First, raw mode: no reliability. A sends 1,000,000 messages of 64 bytes; B should see about
90% of them, and the counters should account for every missing one.

TXT
perf="$IMAGO_ROOT/build/apps/imago-perf"
"$perf" --pair --mode raw --msgs 1000000 --size 64 --loss 0.1 --seed 7 | grep -v '^RESULT '

cat <<'TXT'

Now the same link, the same 10% loss, through imago's reliability engine: sequence numbers,
ACKs, NACKs and retransmission. A sends 200,000 messages; B's application checks every one
for order and integrity. All of them should arrive, exactly once, in order, intact.

TXT
"$perf" --pair --mode stream --msgs 200000 --size 64 --loss 0.1 --seed 7 --stats-period 1
