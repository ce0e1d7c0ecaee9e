# SPDX-License-Identifier: BSD-3-Clause
"""dpdk-testpmd (Debian's ``dpdk`` package) as a typed wrapper: the reference a link's rate
is measured against. Only non-interactive forwarding runs with ``--stats-period`` are used.
"""

from __future__ import annotations

import re
import shutil
import signal
import statistics
from dataclasses import dataclass
from pathlib import Path

from framework.apps import EalConfig
from framework.node import AppProcess, Node
from framework.topology import Interface

_PPS = re.compile(r"(Rx|Tx)-pps:\s+(\d+)")


def testpmd_binary() -> Path | None:
    found = shutil.which("dpdk-testpmd")
    return Path(found) if found else None


@dataclass(frozen=True)
class PmdRates:
    """Median per-second rates over the samples taken while traffic flowed."""

    rx_pps: float
    tx_pps: float
    samples: int


class TestPmdRun:
    def __init__(self, proc: AppProcess):
        self.proc = proc

    def stop(self, timeout: float = 20.0) -> PmdRates:
        """SIGINT (testpmd prints its totals and exits), then the median of the nonzero samples."""
        self.proc.signal(signal.SIGINT)
        self.proc.wait(timeout)
        rx, tx = [], []
        for line in self.proc.lines():
            for kind, value in _PPS.findall(line):
                if int(value) > 0:
                    (rx if kind == "Rx" else tx).append(int(value))
        return PmdRates(
            rx_pps=statistics.median(rx) if rx else 0.0,
            tx_pps=statistics.median(tx) if tx else 0.0,
            samples=max(len(rx), len(tx)),
        )


class TestPmd:
    """testpmd inside one node, one af_packet port, a main lcore that sleeps and one forwarding lcore."""

    __test__ = False  # not a pytest class

    def __init__(self, node: Node, binary: Path | None = None):
        self.node = node
        self.binary = binary or testpmd_binary()

    def start(self, vdev: str, mode: str, *, fwd_lcore: int, main_lcore: int,
              frame_len: int = 64, burst: int = 32, name: str | None = None) -> TestPmdRun:
        """Start ``--forward-mode=mode`` (txonly, rxonly, io) on @p vdev with 1 s stats samples.

        The main lcore only prints stats (it sleeps); the forwarding lcore polls.
        """
        if mode not in ("txonly", "rxonly", "io"):
            raise ValueError(f"unsupported testpmd mode {mode}")
        name = name or f"testpmd-{mode}"
        eal = EalConfig(lcores=f"{min(fwd_lcore, main_lcore)},{max(fwd_lcore, main_lcore)}",
                        file_prefix=f"{self.node.topology.prefix}-{self.node.name}-{name}",
                        vdevs=(vdev,))
        app = [f"--forward-mode={mode}", "--auto-start", "--stats-period", "1", "--nb-cores=1",
               "--total-num-mbufs=8192", f"--burst={burst}", f"--txpkts={frame_len}"]
        argv = [str(self.binary)] + eal.argv() + ["--main-lcore", str(main_lcore), "--"] + app
        return TestPmdRun(self.node.start(argv, name=name))

    def start_on(self, port: Interface, mode: str, **kw) -> TestPmdRun:
        """start() over net_af_packet on @p port, an interface of this node."""
        return self.start(f"net_af_packet0,iface={port.name}", mode, **kw)
