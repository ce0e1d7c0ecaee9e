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
link made of two DPDK rings (the net_ring driver). No hugepages, no NIC needed.

A sends 1,000,000 messages of 64 bytes to B. Between A and its port sits imago's fault
layer, set to drop 10% of frames at random (seed 7, so every run drops the same ones).
This is raw mode: no reliability yet, so B should see about 90% of the messages, and the
counters should account for every missing one.

TXT
"$IMAGO_ROOT/build/apps/imago-perf" --pair --mode raw --msgs 1000000 --size 64 \
  --loss 0.1 --seed 7 --stats-period 0.25
