# SPDX-License-Identifier: BSD-3-Clause
"""net_af_xdp, the second way onto a veth beside net_af_packet: raw frames between two
processes, one per network namespace (tx on lcore 0, rx on lcore 1), and what the PMD refuses.
The reliable modes over it are TestSuite_reliable_af_packet's, run once per PMD.

Debian's DPDK ships the PMD; the kernel runs its XDP program on each veth end (libxdp loads
it, in the generic mode a veth offers) and hands frames to an AF_XDP socket instead of the
AF_PACKET ring. XDP on a veth takes an MTU of at most 3000 here: the suite uses 1500, and
checks that a veth at 9000 is refused with a reason instead of failing silently.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from framework.apps import ImagoPerf, PerfParams, Result, Role
from framework.testsuite import TestSuite
from framework.topology import Interface, Topology

READY_TIMEOUT_S = 30.0
RUN_LIMIT_S = 90.0


def xdp_vdev(port: Interface) -> str:
    return f"net_af_xdp0,iface={port.name}"


class TestSuiteAfXdp(TestSuite):
    """raw frames over net_af_xdp on a veth pair, and a veth MTU it cannot take."""

    @pytest.fixture
    def link(self, topology: Topology, perf_binary) -> tuple[Interface, Interface]:
        return topology.add_veth(topology.add_node("tx"), topology.add_node("rx"), mtu=1500)

    def _run(self, link, params: PerfParams) -> tuple[Result, Result]:
        """rx (lcore 1) first, then tx (lcore 0); @return their RESULTs."""
        tx_if, rx_if = link
        rx_params = replace(params, role=Role.RX, peer_mac=tx_if.mac, duration_s=RUN_LIMIT_S,
                            idle_timeout_ms=3000, loss=None, seed=None)
        rx = ImagoPerf(rx_if.node).start_raw_vdev(xdp_vdev(rx_if), rx_params, lcore=1, name="xdp-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx = ImagoPerf(tx_if.node).start_raw_vdev(
            xdp_vdev(tx_if), replace(params, role=Role.TX, peer_mac=rx_if.mac, duration_s=RUN_LIMIT_S), lcore=0,
            name="xdp-tx")
        t = tx.result(timeout=RUN_LIMIT_S + READY_TIMEOUT_S + 30)
        r = rx.result(timeout=60)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        return t, r

    def test_raw_frames(self, link) -> None:
        """
        Steps:
            100000 raw frames of 64 bytes from tx to rx over net_af_xdp at 50000/s, no
            reliability.
        Verify:
            rx learned the count from the sender's end-of-stream frames; delivered + lost =
            sent; most arrive (at least half: nothing repairs a drop here, and a loaded 2-core
            machine drops some); none corrupted or duplicated; the tx port sent them all.
        """
        tx, rx = self._run(link, PerfParams(role=Role.TX, msgs=100_000, size=64, mode="raw", rate_pps=50_000))
        self.verify(rx.raw.get("sender_reported") is True and rx.msgs_sent == 100_000,
                    f"rx did not learn the count from the sender: {rx.msgs_sent}")
        self.verify(rx.msgs_delivered + rx.lost == rx.msgs_sent, f"{rx.msgs_delivered} + {rx.lost} != {rx.msgs_sent}")
        self.verify(rx.msgs_delivered >= 50_000, f"only {rx.msgs_delivered} of 100000 raw frames arrived")
        for key in ("duplicated", "corrupted"):
            self.verify(getattr(rx, key) == 0, f"rx {key} = {getattr(rx, key)}")
        self.verify(tx.port.opackets >= 100_000, f"tx port sent {tx.port.opackets}")

    def test_a_veth_mtu_xdp_cannot_take_is_refused_with_the_reason(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            A veth pair at MTU 9000; imago-perf --iface END --pmd af_xdp on one end.
        Verify:
            It exits 1 (not a hang, not a crash) and says why: net_af_xdp could not attach,
            and the MTU it wants.
        """
        a, _ = topology.add_veth(topology.add_node("biga"), topology.add_node("bigb"), mtu=9000)
        cp = a.node.exec([str(perf_binary), "--role", "tx", "--iface", a.name, "--pmd", "af_xdp", "--mode", "stream",
                          "--msgs", "10", "--duration", "10"], timeout=60, check=False)
        self.verify(cp.returncode == 1, f"exit {cp.returncode}")
        self.verify("net_af_xdp could not attach" in cp.stderr and "3000" in cp.stderr, cp.stderr[-1500:])

    def test_a_second_process_on_the_interface_leaves_the_first_running(self, link, perf_binary) -> None:
        """
        Steps:
            rx on one veth end over net_af_xdp; a second imago-perf on the same end
            (--iface END --pmd af_xdp); then tx streams 20000 messages to the first.
        Verify:
            The second exits 1 saying another imago process uses the interface; the first
            receives everything (before, the refused second removed the first's XDP program
            on its way out, and the first received nothing, silently: an outside tester, 3 of 3).
        """
        tx_if, rx_if = link
        params = PerfParams(role=Role.TX, msgs=20_000, size=64, mode="stream", peer_mac=rx_if.mac,
                            duration_s=RUN_LIMIT_S)
        rx = ImagoPerf(rx_if.node).start_raw_vdev(
            xdp_vdev(rx_if), replace(params, role=Role.RX, peer_mac=tx_if.mac, idle_timeout_ms=3000), lcore=1,
            name="xdp-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        cp = rx_if.node.exec([str(perf_binary), "--role", "rx", "--iface", rx_if.name, "--pmd", "af_xdp",
                              "--mode", "stream", "--msgs", "10", "--duration", "10"], timeout=60, check=False)
        self.verify(cp.returncode == 1, f"second: exit {cp.returncode}")
        self.verify("in use by another imago process over net_af_xdp" in cp.stderr, cp.stderr[-1500:])
        tx = ImagoPerf(tx_if.node).start_raw_vdev(xdp_vdev(tx_if), params, lcore=0, name="xdp-tx")
        t = tx.result(timeout=RUN_LIMIT_S + READY_TIMEOUT_S + 30)
        r = rx.result(timeout=60)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        self.verify(r.msgs_delivered == 20_000 and r.lost == 0 and not t.raw["peer_dead"],
                    f"first rx delivered {r.msgs_delivered}, lost {r.lost}; tx peer_dead {t.raw['peer_dead']}")
