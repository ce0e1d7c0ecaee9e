# SPDX-License-Identifier: BSD-3-Clause
"""imago-perf ``--mode raw`` between two processes over net_af_packet on a veth pair.

Raw mode sends numbered frames from a tx node to an rx node with no reliability engine, so it
measures the link itself: what the rx app counts is what the veth pair and the two
net_af_packet ports carried. Each node is a process of its own, in a namespace of its own, on
one lcore (rx on lcore 1, tx on lcore 0: the two cores of a small VM). The sender is paced so
that a 2-core machine, which also runs the kernel's veth and AF_PACKET work, does not drop much.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from framework.apps import Encap, ImagoPerf, RawParams, Result, Role
from framework.testsuite import TestSuite
from framework.topology import Interface, Topology

#: Frames per run.
MSGS = 200_000
#: Message size in bytes.
SIZE = 64
#: Sender pacing, messages per second (MSGS / RATE = 4 s of traffic).
RATE_PPS = 50_000
#: Least fraction of the sent messages that must arrive on a loss-free link.
MIN_DELIVERED = 0.95
#: Drop probability of the loss test. The fault layer's own count is checked to +- 0.005: the
#: binomial standard deviation at MSGS = 200000 is 0.07 %, so that is 7 sigma.
LOSS = 0.1
#: The veth's own loss, on top of injected drops, that a loaded 2-core machine may show.
LINK_LOSS_MAX = 0.10
#: rx finishes after this much silence once traffic has begun.
IDLE_TIMEOUT_MS = 2000
#: Seconds allowed for EAL start-up until READY.
READY_TIMEOUT_S = 30.0
#: Subnet made up for the tests; it exists only inside the namespaces of this suite.
TX_IP, RX_IP = "10.199.10.1/24", "10.199.10.2/24"


class TestSuiteRawAfPacket(TestSuite):
    """Raw frames tx -> rx over a veth pair: counts, integrity, injected loss."""

    @pytest.fixture
    def link(self, topology: Topology, perf_binary: Path) -> tuple[Interface, Interface]:
        """Nodes tx and rx joined by a veth pair (addresses of 10.199.10.0/24)."""
        tx, rx = topology.add_node("tx"), topology.add_node("rx")
        return topology.add_veth(tx, rx, a_ipv4=TX_IP, b_ipv4=RX_IP)

    def _run(self, link: tuple[Interface, Interface], tx_params: RawParams) -> tuple[Result, Result]:
        """Start rx on lcore 1, wait for READY, run tx on lcore 0; return (tx, rx) RESULTs."""
        tx_if, rx_if = link
        traffic_s = tx_params.msgs / tx_params.rate_pps if tx_params.rate_pps else 10.0
        rx_params = RawParams(
            role=Role.RX,
            msgs=tx_params.msgs,
            size=tx_params.size,
            burst=tx_params.burst,
            encap=tx_params.encap,
            idle_timeout_ms=IDLE_TIMEOUT_MS,
            duration_s=traffic_s + READY_TIMEOUT_S + 30,
            src_ip=tx_params.dst_ip,
            dst_ip=tx_params.src_ip,
            peer_mac=tx_if.mac,
            mode=tx_params.mode,
        )
        rx = ImagoPerf(rx_if.node).start_raw(rx_if, rx_params, lcore=1, name="perf-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx_params = replace(tx_params, peer_mac=rx_if.mac, duration_s=traffic_s + 30)
        tx = ImagoPerf(tx_if.node).start_raw(tx_if, tx_params, lcore=0, name="perf-tx")
        tx_res = tx.result(timeout=READY_TIMEOUT_S + traffic_s + 60)
        rx_res = rx.result(timeout=IDLE_TIMEOUT_MS / 1000 + 30)
        print("tx RESULT", json.dumps(tx_res.raw))
        print("rx RESULT", json.dumps(rx_res.raw))
        return tx_res, rx_res

    def _verify_counts(self, tx: Result, rx: Result, msgs: int) -> None:
        """The checks every run must pass, whatever its loss."""
        self.verify(tx.mode == "raw" and tx.role == "tx", f"tx RESULT mode/role {tx.mode}/{tx.role}")
        self.verify(rx.mode == "raw" and rx.role == "rx", f"rx RESULT mode/role {rx.mode}/{rx.role}")
        self.verify(tx.msgs_sent == msgs, f"tx msgs_sent {tx.msgs_sent}, requested {msgs}")
        self.verify(rx.msgs_sent == msgs, f"rx learned msgs_sent {rx.msgs_sent}, tx sent {msgs}")
        # Keys beyond the contract, checked when the app reports them: rx took msgs_sent from
        # the sender's end-of-stream frames (not from its own --msgs), and no run hit --duration.
        self.verify(
            rx.raw.get("sender_reported", True) is True,
            "rx msgs_sent is its own --msgs: no end-of-stream frame from the sender arrived",
        )
        for r in (tx, rx):
            self.verify(not r.raw.get("timed_out", False), f"{r.role} stopped on its --duration limit")
        self.verify(
            rx.msgs_delivered + rx.lost == rx.msgs_sent,
            f"rx delivered {rx.msgs_delivered} + lost {rx.lost} != sent {rx.msgs_sent}",
        )
        self.verify(rx.duplicated == 0, f"rx duplicated {rx.duplicated}")
        self.verify(rx.corrupted == 0, f"rx corrupted {rx.corrupted}")
        self.verify(
            rx.port.ipackets >= rx.msgs_delivered,
            f"rx port ipackets {rx.port.ipackets} < delivered {rx.msgs_delivered}",
        )
        self.verify(
            rx.bytes_delivered >= rx.msgs_delivered * SIZE,
            f"rx bytes_delivered {rx.bytes_delivered} < {rx.msgs_delivered} x {SIZE}",
        )

    def _verify_lossless(self, tx: Result, rx: Result, msgs: int) -> None:
        self._verify_counts(tx, rx, msgs)
        self.verify(
            rx.msgs_delivered >= MIN_DELIVERED * msgs,
            f"rx delivered {rx.msgs_delivered} of {msgs} "
            f"({rx.msgs_delivered / msgs:.2%} < {MIN_DELIVERED:.0%})",
        )

    def test_l2(self, link: tuple[Interface, Interface]) -> None:
        """Paced 64-byte frames in L2 encapsulation arrive, counted and intact.

        Steps:
            * Start rx (lcore 1) on the rx veth end; wait for READY.
            * Start tx (lcore 0): 200000 messages of 64 bytes, L2, paced at 50000/s, to the rx
              end's MAC; wait for both to exit.

        Verify:
            * Both exit 0 and end with a valid RESULT line.
            * tx msgs_sent == 200000; rx msgs_sent == 200000 (learned from the sender).
            * rx msgs_delivered + lost == msgs_sent; delivered >= 95 %.
            * duplicated == 0, corrupted == 0; rx port ipackets >= delivered.
        """
        params = RawParams(role=Role.TX, msgs=MSGS, size=SIZE, encap=Encap.L2, rate_pps=RATE_PPS)
        tx, rx = self._run(link, params)
        self._verify_lossless(tx, rx, MSGS)

    def test_udp(self, link: tuple[Interface, Interface]) -> None:
        """The same in UDP/IPv4 encapsulation between 10.199.10.1 and 10.199.10.2.

        Steps:
            * As test_l2, with --encap udp --src-ip 10.199.10.1 --dst-ip 10.199.10.2 (the
              addresses of the two veth ends, inside the namespaces only).

        Verify:
            * As test_l2.
        """
        tx_if, rx_if = link
        params = RawParams(
            role=Role.TX, msgs=MSGS, size=SIZE, encap=Encap.UDP, rate_pps=RATE_PPS,
            src_ip=tx_if.ip, dst_ip=rx_if.ip,
        )
        tx, rx = self._run(link, params)
        self._verify_lossless(tx, rx, MSGS)

    def test_injected_loss(self, link: tuple[Interface, Interface]) -> None:
        """The tx fault shim drops 10 % of the frames; rx counts exactly what is missing.

        Steps:
            * As test_l2, with --loss 0.1 --seed 7 on the tx side.

        Verify:
            * The counts of test_l2 (sent, learned, delivered + lost == sent, no duplicates or
              corruption).
            * The fault layer dropped 0.10 +- 0.005 of the frames (its own counter, tx side).
            * Every injected drop is among rx's losses; what else is missing is the veth's own
              loss under load, which stays below LINK_LOSS_MAX (af_packet on 2 busy cores).
        """
        params = RawParams(
            role=Role.TX, msgs=MSGS, size=SIZE, encap=Encap.L2, rate_pps=RATE_PPS, loss=LOSS, seed=7
        )
        tx, rx = self._run(link, params)
        self._verify_counts(tx, rx, MSGS)
        injected = tx.raw["fault_A"]["tx_dropped"]
        self.verify(
            abs(injected / tx.msgs_sent - LOSS) <= 0.005,
            f"fault layer dropped {injected}/{tx.msgs_sent}, expected {LOSS} +- 0.005",
        )
        self.verify(
            rx.lost == rx.msgs_sent - rx.msgs_delivered,
            f"lost {rx.lost} != sent {rx.msgs_sent} - delivered {rx.msgs_delivered}",
        )
        link_loss = rx.lost - injected
        self.verify(link_loss >= 0, f"rx lost {rx.lost} < injected drops {injected}")
        self.verify(
            link_loss <= LINK_LOSS_MAX * rx.msgs_sent,
            f"the link itself lost {link_loss} of {rx.msgs_sent} on top of the injected drops",
        )

    def test_pingpong(self, link: tuple[Interface, Interface]) -> None:
        """Raw ping-pong over the veth: every ping answered once, round trips measured.

        Steps:
            * Start the echoer (--role rx, lcore 1); wait for READY.
            * Start the pinger (--role tx, lcore 0): 20000 pings of 64 bytes, one outstanding,
              10 ms reply timeout, to the echoer's MAC; wait for both to exit.

        Verify:
            * replies + lost == pings sent; at least 99 % answered; nothing corrupted.
            * the echoer echoed at least as many frames as the pinger got replies.
            * RESULT rtt_us holds 0 < p50 <= p99 <= p999 <= max.
        """
        pings = 20_000
        params = RawParams(role=Role.TX, msgs=pings, size=SIZE, mode="raw-pingpong", ping_timeout_us=10_000)
        tx, rx = self._run(link, params)
        self.verify(tx.msgs_sent == pings, f"pinger sent {tx.msgs_sent} of {pings}")
        self.verify(tx.msgs_delivered + tx.lost == tx.msgs_sent,
                    f"replies {tx.msgs_delivered} + lost {tx.lost} != sent {tx.msgs_sent}")
        self.verify(tx.msgs_delivered >= 0.99 * pings, f"only {tx.msgs_delivered} of {pings} answered")
        self.verify(tx.corrupted == 0, f"corrupted {tx.corrupted}")
        self.verify(rx.raw["echoed"] >= tx.msgs_delivered, f"echoed {rx.raw['echoed']} < replies")
        rtt = tx.raw["rtt_us"]
        self.verify(0 < rtt["p50"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"], f"rtt_us out of order: {rtt}")
        print(f"raw ping-pong over veth/af_packet: rtt_us {rtt}")
