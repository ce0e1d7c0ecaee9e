# SPDX-License-Identifier: BSD-3-Clause
"""imago-perf over net_memif between two processes: however a run ends, neither side crashes.

Issue #9, item 14: bench/compare's memif rows sometimes ended with a SIGSEGV inside
librte_net_memif.so. DPDK 22.11's net_memif tears a connection down on EAL's interrupt thread
when the peer leaves (memif_disconnect() unmaps the rings while an lcore may be inside
rte_eth_rx_burst()/rte_eth_tx_burst()), and a closed server leaves its listener's interrupt
source registered, which that thread touches after rte_eal_cleanup(). imago holds the
interrupt thread while it polls a connected memif port and from the port's stop to its exit
(dataplane/port.h, "Holding DPDK's interrupt thread").

The pairs are started as bench/compare starts them (bench/compare_lib/runners.py): the receiver
is the memif server on lcore 1, started first; the sender is the client on lcore 0. The long
reproducer is scripts/repro-memif-exit.sh (hundreds of pairs; about 7 % crashed without the
fix); this suite runs a short version of it.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from framework.apps import ImagoPerf, PerfParams, PerfRun, Role
from framework.testsuite import TestSuite
from framework.topology import Topology

#: Pairs per test, about 1.5 s each: every mode with every ending once (12 = 3 x 4).
PAIRS = 12
#: How a pair ends: the sender at its --duration while the receiver polls on (the bench's way),
#: or SIGTERM to the sender, the receiver, or both at once, mid-traffic.
ENDINGS = ("tx-first", "term-rx", "term-both", "term-tx")
MODES = ("raw", "stream", "pingpong")
#: Messages never all sent: every pair ends by time, idle timeout or signal.
MSGS = 100_000_000
READY_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 20.0


def _outcome(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        return f"killed by {signal.Signals(-rc).name}"
    return f"exit {rc}"


class TestSuiteMemif(TestSuite):
    """Ends of imago-perf runs over net_memif."""

    def _pair(self, perf: ImagoPerf, i: int, mode: str, ending: str, rnd: random.Random) -> tuple[int, int]:
        """Run pair @p i and return the (rx, tx) exit codes (negative: killed by that signal)."""
        sock = Path("/tmp") / f"imago-dts-memif-{os.getpid()}-{i}.sock"
        tx_s, idle_ms, term_s = rnd.uniform(0.2, 0.4), rnd.randint(100, 300), rnd.uniform(0.1, 0.3)
        if ending != "tx-first":
            tx_s, idle_ms = 0.6 if ending == "term-rx" else 5.0, 5000
        rx_params = PerfParams(role=Role.RX, msgs=MSGS, mode=mode, duration_s=10.0, idle_timeout_ms=idle_ms)
        tx_params = PerfParams(role=Role.TX, msgs=MSGS, mode=mode, duration_s=round(tx_s, 3))
        rx: PerfRun | None = None
        tx: PerfRun | None = None
        try:
            rx = perf.start_raw_vdev(f"net_memif0,role=server,socket={sock},socket-abstract=no", rx_params,
                                     lcore=1, name=f"p{i}-{mode}-{ending}-rx")
            rx.wait_ready(READY_TIMEOUT_S)
            tx = perf.start_raw_vdev(f"net_memif0,role=client,socket={sock},socket-abstract=no", tx_params,
                                     lcore=0, name=f"p{i}-{mode}-{ending}-tx")
            tx.wait_ready(READY_TIMEOUT_S)
            if ending != "tx-first":
                time.sleep(term_s)
                for run, side in ((rx, "rx"), (tx, "tx")):
                    if ending in ("term-both", f"term-{side}"):
                        run.proc.signal(signal.SIGTERM)
            rc_tx = tx.proc.wait(EXIT_TIMEOUT_S)
            rc_rx = rx.proc.wait(EXIT_TIMEOUT_S)
            return rc_rx, rc_tx
        finally:
            for run in (tx, rx):
                if run is not None and run.proc.running:
                    run.stop()
            sock.unlink(missing_ok=True)

    def test_no_crash_at_the_end_of_memif_runs(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Run PAIRS receiver/sender pairs over net_memif in modes raw, stream and pingpong,
            ending each differently: the sender stops at its --duration while the receiver
            still polls, or SIGTERM reaches the receiver, the sender, or both at once, 0.1 to
            0.3 s into the traffic.
        Verify:
            Every process of every pair exits 0: none dies of a signal (SIGSEGV in
            librte_net_memif.so was the bug).
        """
        node = topology.add_node("memif")
        perf = ImagoPerf(node)
        rnd = random.Random(14)  # fixed timings: a failure can be run again as it was
        bad = []
        for i in range(PAIRS):
            mode, ending = MODES[i % len(MODES)], ENDINGS[i % len(ENDINGS)]
            rc_rx, rc_tx = self._pair(perf, i, mode, ending, rnd)
            for side, rc in (("rx", rc_rx), ("tx", rc_tx)):
                if rc != 0:
                    bad.append(f"pair {i} ({mode}, {ending}): {side} {_outcome(rc)}")
        self.verify(not bad, f"{len(bad)} bad exits in {PAIRS} memif pairs: " + "; ".join(bad))

    def test_a_client_with_no_server_says_to_start_the_server(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            imago-perf over a net_memif client whose socket has no server.
        Verify:
            Exit 1 naming the cause: the client needs its server running first (before:
            only "start failed: Operation not permitted", an outside tester).
        """
        node = topology.add_node("m")
        sock = f"/tmp/imago-dts-memif-noserver-{os.getpid()}.sock"
        cp = node.exec([str(perf_binary), "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--file-prefix",
                        f"imago-dts-memif-ns-{os.getpid()}",
                        f"--vdev=net_memif0,role=client,socket={sock},socket-abstract=no", "--", "--role", "tx",
                        "--mode", "stream", "--msgs", "10", "--duration", "10"], timeout=60, check=False)
        self.verify(cp.returncode == 1 and "needs its server (role=server) running" in cp.stderr,
                    f"exit {cp.returncode}; {cp.stderr[-600:]!r}")
        self.verify(not Path(sock).exists(), f"{sock} left behind")
