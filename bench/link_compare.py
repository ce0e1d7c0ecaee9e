#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Raw link rates in one run: imago-perf raw mode next to dpdk-testpmd on the same links.

Links, each between two processes in two network namespaces, sender on lcore 0 and receiver
on lcore 1 (each testpmd also has a sleeping main lcore on the other core):
  - net_af_packet on a veth pair;
  - net_memif (shared memory; the receiver is the memif server).
imago-perf --role tx -> --role rx is measured first, then testpmd txonly -> rxonly, with the
same frame length (64-byte payload + 18-byte L2 encapsulation = 82 bytes) and burst 32.
imago-perf builds, checksums and verifies every payload; testpmd only moves frames.

Also imago-perf --pair over net_ring (one process, two lcores). testpmd has no peer figure
there: its net_ring vdevs share one ring for rx and tx, so it cannot build the crossed pair.

Prints a Markdown table with ratios. Run as root: /usr/bin/python3 bench/link_compare.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "dts"))

from framework.apps import Encap, ImagoPerf, RawParams, Role  # noqa: E402
from framework.node import LogDir  # noqa: E402
from framework.testpmd import TestPmd, testpmd_binary  # noqa: E402
from framework.topology import Topology, install_cleanup_handlers  # noqa: E402

PAYLOAD = 64
FRAME = PAYLOAD + 18


def imago_link(tx_node, tx_vdev: str, rx_node, rx_vdev: str, msgs: int) -> tuple[float, float, str]:
    """@return (sender rate, receiver delivered rate, "delivered of sent")."""
    rx = ImagoPerf(rx_node).start_raw_vdev(
        rx_vdev, RawParams(role=Role.RX, msgs=msgs, size=PAYLOAD, encap=Encap.L2,
                           idle_timeout_ms=1000, duration_s=120), lcore=1, name="perf-rx")
    rx.wait_ready(30)
    time.sleep(0.5)  # a memif server must be listening before the client connects
    tx = ImagoPerf(tx_node).start_raw_vdev(
        tx_vdev, RawParams(role=Role.TX, msgs=msgs, size=PAYLOAD, encap=Encap.L2,
                           duration_s=120), lcore=0, name="perf-tx")
    t = tx.result(timeout=150)
    r = rx.result(timeout=60)
    tx_rate = t.msgs_sent / t.duration_s if t.duration_s else 0.0
    return tx_rate, r.msgs_per_s, f"{r.msgs_delivered} of {r.msgs_sent}"


def testpmd_link(tx_node, tx_vdev: str, rx_node, rx_vdev: str, seconds: float) -> tuple[float, float]:
    """@return (txonly rate, rxonly rate): medians of the 1 s samples."""
    rx = TestPmd(rx_node).start(rx_vdev, "rxonly", fwd_lcore=1, main_lcore=0, frame_len=FRAME)
    rx.proc.wait_for_line("Port statistics", 30)
    tx = TestPmd(tx_node).start(tx_vdev, "txonly", fwd_lcore=0, main_lcore=1, frame_len=FRAME)
    tx.proc.wait_for_line("Port statistics", 30)
    time.sleep(seconds)
    t = tx.stop()
    r = rx.stop()
    return t.tx_pps, r.rx_pps


def imago_pair(msgs: int) -> tuple[float, str]:
    out = subprocess.run([str(ROOT / "build/apps/imago-perf"), "--pair", "--mode", "raw",
                          "--msgs", str(msgs), "--size", str(PAYLOAD), "--quiet"],
                         capture_output=True, text=True, timeout=300, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1][len("RESULT "):])
    return r["msgs_per_s"], f"{r['msgs_delivered']} of {r['msgs_sent']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--msgs", type=int, default=3_000_000, help="imago-perf messages per run")
    ap.add_argument("--seconds", type=float, default=6, help="testpmd run length")
    args = ap.parse_args()
    if testpmd_binary() is None:
        print("dpdk-testpmd not found (Debian package 'dpdk')", file=sys.stderr)
        return 1
    install_cleanup_handlers()
    logs = LogDir(Path("/tmp") / f"imago-link-compare-{os.getpid()}")
    sock = f"/tmp/imago-link-compare-{os.getpid()}.sock"
    rows, notes = [], []
    with Topology(log_dir=logs) as topo:
        tx_if, rx_if = topo.add_veth(topo.add_node("tx"), topo.add_node("rx"))
        links = {
            "net_af_packet / veth": (f"net_af_packet0,iface={tx_if.name}", f"net_af_packet0,iface={rx_if.name}"),
            "net_memif": (f"net_memif0,role=client,socket={sock},socket-abstract=no",
                          f"net_memif0,role=server,socket={sock},socket-abstract=no"),
        }
        for name, (tx_vdev, rx_vdev) in links.items():
            itx, irx, got = imago_link(tx_if.node, tx_vdev, rx_if.node, rx_vdev, args.msgs)
            ptx, prx = testpmd_link(tx_if.node, tx_vdev, rx_if.node, rx_vdev, args.seconds)
            rows += [(f"{name}, sender", itx, ptx), (f"{name}, receiver", irx, prx)]
            notes.append(f"{name}: imago delivered {got}")
    pair_rate, got = imago_pair(args.msgs)
    rows.append(("net_ring --pair (one process), receiver", pair_rate, 0.0))
    notes.append(f"net_ring pair: imago delivered {got}; no testpmd peer figure (see --help)")
    print(f"\n{PAYLOAD}-byte payload, {FRAME}-byte frames, burst 32; Mpps = million frames/s\n")
    print("| link, side | imago-perf raw (Mpps) | dpdk-testpmd (Mpps) | imago / testpmd |")
    print("|---|---:|---:|---:|")
    for name, a, b in rows:
        ratio = f"{a / b:.2f}" if b else "-"
        peer = f"{b / 1e6:.3f}" if b else "-"
        print(f"| {name} | {a / 1e6:.3f} | {peer} | {ratio} |")
    print()
    for n in notes:
        print(n)
    print(f"logs: {logs.path}")
    try:
        os.unlink(sock)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
