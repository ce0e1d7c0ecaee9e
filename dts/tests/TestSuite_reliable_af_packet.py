# SPDX-License-Identifier: BSD-3-Clause
"""The reliability engine between two processes over a veth pair, through each kernel-interface
PMD: net_af_packet, and net_af_xdp (every test runs once per PMD; XDP on a veth wants an MTU
of at most 3000, and the pair has 1500).

Each node is a process in its own namespace on one lcore (tx on lcore 0, rx on lcore 1).
The sender is not paced: the engine's windows and credits must absorb what the kernel's
veth and AF_PACKET rings drop on this 2-core machine, and the fault layer adds more loss.
"""

from __future__ import annotations

import json
import re
import signal
import time
from dataclasses import replace

import pytest

from framework.apps import Encap, ImagoPerf, PerfParams, Result, Role, af_packet_vdev
from framework.testsuite import TestSuite
from framework.topology import Interface, Topology

READY_TIMEOUT_S = 30.0
RUN_LIMIT_S = 90.0


class TestSuiteReliableAfPacket(TestSuite):
    """stream and pingpong through the engine, with and without injected faults."""

    @pytest.fixture(params=["af_packet", "af_xdp"])
    def link(self, topology: Topology, perf_binary, request) -> tuple[Interface, Interface]:
        tx, rx = topology.add_node("tx"), topology.add_node("rx")
        self.pmd = request.param
        return topology.add_veth(tx, rx, mtu=1500)

    def _start(self, port: Interface, params: PerfParams, lcore: int, name: str):
        """imago-perf on @p port through this test's PMD."""
        return ImagoPerf(port.node).start_raw_vdev(f"net_{self.pmd}0,iface={port.name}", params, lcore=lcore,
                                                   name=name)

    def _run(self, link, params: PerfParams) -> tuple[Result, Result]:
        """rx (lcore 1) first, then tx (lcore 0); @return their RESULTs."""
        tx_if, rx_if = link
        rx_params = replace(params, role=Role.RX, peer_mac=tx_if.mac, duration_s=RUN_LIMIT_S,
                            idle_timeout_ms=3000, loss=None, seed=None, src_ip=params.dst_ip, dst_ip=params.src_ip)
        rx = self._start(rx_if, rx_params, 1, "perf-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx = self._start(tx_if, replace(params, role=Role.TX, peer_mac=rx_if.mac, duration_s=RUN_LIMIT_S), 0, "perf-tx")
        t = tx.result(timeout=RUN_LIMIT_S + READY_TIMEOUT_S + 30)
        r = rx.result(timeout=60)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        return t, r

    def _verify_stream(self, tx: Result, rx: Result, msgs: int) -> None:
        self.verify(not tx.raw["timed_out"] and not rx.raw["timed_out"], "a side hit its --duration")
        self.verify(not tx.raw["peer_dead"], "the sender declared the receiver dead")
        self.verify(tx.msgs_sent == msgs, f"tx sent {tx.msgs_sent} of {msgs}")
        self.verify(rx.msgs_delivered == msgs, f"rx delivered {rx.msgs_delivered} of {msgs}")
        for key in ("duplicated", "reordered", "corrupted", "lost"):
            self.verify(getattr(rx, key) == 0, f"rx {key} = {getattr(rx, key)}")

    def test_stream(self, link) -> None:
        """
        Steps:
            Stream 300000 messages of 64 bytes from tx to rx through the engine, unpaced.
        Verify:
            Every message arrives once, in order, intact; neither side times out or sees the
            peer die.
        """
        tx, rx = self._run(link, PerfParams(role=Role.TX, msgs=300_000, size=64, mode="stream"))
        self._verify_stream(tx, rx, 300_000)

    def test_stream_through_injected_faults(self, link) -> None:
        """
        Steps:
            As test_stream with 100000 messages of 256 bytes and 5 % tx loss (seed 11) in the
            fault layer on top of whatever the veth drops.
        Verify:
            Every message arrives once, in order, intact; the sender retransmitted.
        """
        params = PerfParams(role=Role.TX, msgs=100_000, size=256, mode="stream", loss=0.05, seed=11)
        tx, rx = self._run(link, params)
        self._verify_stream(tx, rx, 100_000)
        self.verify(tx.retransmits > 0, "5 % loss and no retransmission")

    @pytest.mark.parametrize("encap", [Encap.L2, Encap.UDP], ids=["l2", "udp"])
    def test_stream_by_reference_with_loss(self, link, encap: Encap) -> None:
        """
        Steps:
            As test_stream_with_loss with 20000 messages of 4000 bytes: above half a frame,
            so imago-perf sends each from a buffer of its own by reference (three frames, each
            two chained mbufs, the second attached to the buffer; docs/PROTOCOL.md 3.4.1); in
            L2 and in UDP/IPv4 with its checksum (over both parts of a chained frame: before,
            it covered the first, and the receiver dropped every such frame udp_checksum).
        Verify:
            Every message arrives once, in order, intact; the sender retransmitted. On
            net_af_packet every message went by reference (engine msgs_by_ref) and frames
            went out chained; on net_af_xdp (it sends a chain's first mbuf alone) none did.
        """
        ips = {"src_ip": "10.77.0.1", "dst_ip": "10.77.0.2"} if encap is Encap.UDP else {}
        params = PerfParams(role=Role.TX, msgs=20_000, size=4000, mode="stream", loss=0.05, seed=12, encap=encap,
                            **ips)
        tx, rx = self._run(link, params)
        self._verify_stream(tx, rx, 20_000)
        self.verify(tx.retransmits > 0, "5 % loss and no retransmission")
        eng = tx.raw["engine_A"]
        want = 20_000 if self.pmd == "af_packet" else 0
        self.verify(eng["msgs_by_ref"] == want, f"{eng['msgs_by_ref']} of 20000 sent by reference ({self.pmd})")
        self.verify(eng["link_chained_out"] >= 3 * want, f"{eng['link_chained_out']} frames chained")

    def test_a_run_cut_short_with_messages_in_flight_ends_cleanly(self, link) -> None:
        """
        Steps:
            Stream messages of 4000 bytes (sent by reference on net_af_packet) and stop the
            sender at its --duration of 0.3 s, long before the 1000000 are sent: the engine
            still holds unacknowledged messages by reference as imago-perf tears it down.
        Verify:
            The sender exits 0 with its RESULT, ended "duration" (it died of SIGSEGV: the
            engine gave the buffers back to an application object already destroyed).
        """
        tx_if, rx_if = link
        params = PerfParams(role=Role.RX, msgs=1_000_000, size=4000, mode="stream", peer_mac=tx_if.mac,
                            duration_s=RUN_LIMIT_S, idle_timeout_ms=1000)
        rx = self._start(rx_if, params, 1, "cut-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx = self._start(tx_if, replace(params, role=Role.TX, peer_mac=rx_if.mac, duration_s=0.3, idle_timeout_ms=None),
                         0, "cut-tx")
        t = tx.result(timeout=RUN_LIMIT_S)
        print("tx RESULT", json.dumps(t.raw))
        self.verify(t.raw["ended"] == "duration" and 0 < t.msgs_sent < 1_000_000, f"tx: {t.raw['ended']}, "
                    f"{t.msgs_sent} sent")
        if self.pmd == "af_packet":
            self.verify(t.raw["engine_A"]["msgs_by_ref"] > 0, "no message went by reference")
        rx.stop()

    def test_a_receiver_that_gives_up_on_silence_says_idle(self, link) -> None:
        """
        Steps:
            rx expects 1000 messages with --idle-timeout-ms 500; tx sends 400 and leaves.
        Verify:
            rx delivers the 400 and ends "idle", with 600 lost (before, it said "done": a
            receiver cut off by a link down for a second looked like a finished run).
        """
        tx_if, rx_if = link
        params = PerfParams(role=Role.RX, msgs=1000, size=64, mode="stream", peer_mac=tx_if.mac,
                            duration_s=RUN_LIMIT_S, idle_timeout_ms=500)
        rx = self._start(rx_if, params, 1, "perf-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx = self._start(tx_if, replace(params, role=Role.TX, msgs=400, peer_mac=rx_if.mac), 0, "perf-tx")
        t = tx.result(timeout=RUN_LIMIT_S)
        r = rx.result(timeout=60)
        print("rx RESULT", json.dumps(r.raw))
        self.verify(t.raw["ended"] == "done", f"tx ended {t.raw['ended']}")
        self.verify(r.raw["ended"] == "idle" and r.msgs_delivered == 400 and r.lost == 600,
                    f"rx ended {r.raw['ended']}, delivered {r.msgs_delivered}, lost {r.lost}")

    def test_jumbo_frames_beyond_the_rings_frames_are_refused(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            A veth pair at MTU 9000; imago-perf --mtu 9000 over a net_af_packet vdev without
            framesz (its ring frames hold 2048 bytes).
        Verify:
            Exit 1 naming framesz (before: accepted, then every frame dropped as oerrors and
            the run stalled, silently: an outside tester, 2 of 2).
        """
        a, _ = topology.add_veth(topology.add_node("ja"), topology.add_node("jb"), mtu=9000)
        cp = a.node.exec([str(perf_binary), "-l", "0", "--no-huge", "-m", "512", "--no-pci", "--file-prefix",
                          f"imago-dts-jumbo-{a.name}", f"--vdev=net_af_packet0,iface={a.name}", "--", "--role", "tx",
                          "--mode", "stream", "--mtu", "9000", "--msgs", "10", "--duration", "10"],
                         timeout=60, check=False)
        self.verify(cp.returncode == 1 and "framesz" in cp.stderr, f"exit {cp.returncode}; {cp.stderr[-800:]!r}")

    def test_peers_with_different_mtus_refuse_each_other_and_say_why(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            A veth pair at MTU 9000; the receiver runs imago-perf --mtu 1500, the sender
            --mtu 9000 (its ring frames sized for it), 1,000 messages of 1 KiB, --dead-after-ms 1000.
        Verify:
            No session: the sender ends peer_dead with nothing delivered, both count
            reject settings_mismatch and both say on stderr which frame sizes differ (before: the
            sender's frames were cut short on their way in, it resent them until it declared
            the receiver dead, and nothing said why: an outside tester).
        """
        tx_if, rx_if = topology.add_veth(topology.add_node("mtx"), topology.add_node("mrx"), mtu=9000)
        base = PerfParams(role=Role.RX, msgs=1000, size=1024, mode="stream", dead_after_ms=1000)
        rx = ImagoPerf(rx_if.node).start_raw_vdev(
            af_packet_vdev(rx_if.name), replace(base, peer_mac=tx_if.mac, mtu=1500, duration_s=8), lcore=1, name="m-rx")
        rx.wait_ready(READY_TIMEOUT_S)
        tx = ImagoPerf(tx_if.node).start_raw_vdev(
            af_packet_vdev(tx_if.name, 9000), replace(base, role=Role.TX, peer_mac=rx_if.mac, mtu=9000, duration_s=30),
            lcore=0, name="m-tx")
        t, r = tx.result(timeout=60), rx.result(timeout=60)
        for run, res, engine in ((tx, t, "engine_A"), (rx, r, "engine_B")):
            refused = res.raw[engine]["reject"]["settings_mismatch"]
            said = [l for l in run.proc.lines("stderr") if "settings_mismatch" in l]
            print(run.proc.name, "settings_mismatch", refused, said)
            self.verify(refused >= 1 and len(said) == 1 and "1496" in said[0] and "8996" in said[0],
                        f"{run.proc.name}: reject settings_mismatch {refused}, said {said}")
        self.verify(t.raw["peer_dead"] and r.msgs_delivered == 0,
                    f"tx peer_dead {t.raw['peer_dead']}, rx delivered {r.msgs_delivered}")

    def test_pingpong(self, link) -> None:
        """
        Steps:
            10000 reliable round trips of 64 bytes, one outstanding, FASTPATH.
        Verify:
            Every ping answered, none lost; 0 < p50 <= p99 <= max.
        """
        tx, rx = self._run(link, PerfParams(role=Role.TX, msgs=10_000, size=64, mode="pingpong"))
        self.verify(tx.msgs_delivered == 10_000 and tx.lost == 0, f"replies {tx.msgs_delivered}, lost {tx.lost}")
        rtt = tx.raw["rtt_us"]
        self.verify(0 < rtt["p50"] <= rtt["p99"] <= rtt["max"], f"rtt_us out of order: {rtt}")
        print(f"reliable ping-pong over veth/{self.pmd}: rtt_us {rtt}")

    def test_rate(self, link) -> None:
        """
        Steps:
            Send 40000 messages of 64 bytes at 20000/s through the engine (the NASA tests'
            fixed-rate stream).
        Verify:
            Every message arrives once, in order, intact; the delivered rate is at most 10 %
            above the asked one (pacing) and at least half of it; the end-to-end delay
            percentiles are ordered.
        """
        tx, rx = self._run(link, PerfParams(role=Role.TX, msgs=40_000, size=64, mode="rate", rate_pps=20_000))
        self._verify_stream(tx, rx, 40_000)
        # Pacing holds the rate down; a loaded 2-core machine may lose slots, never add them.
        self.verify(10_000 <= rx.msgs_per_s <= 22_000, f"delivered {rx.msgs_per_s:.0f}/s, asked 20000/s")
        d = rx.raw["delay_us"]
        self.verify(0 < d["p50"] <= d["p99"] <= d["max"], f"delay_us out of order: {d}")
        print(f"rate mode over veth/af_packet: delay_us {d}")

    def test_echo(self, link) -> None:
        """
        Steps:
            Stream 50000 messages of 64 bytes from tx; rx sends each back through its engine.
        Verify:
            Every message arrives at rx once, in order, intact, and comes back to tx intact.
        """
        tx, rx = self._run(link, PerfParams(role=Role.TX, msgs=50_000, size=64, mode="echo"))
        self._verify_stream(tx, rx, 50_000)
        self.verify(tx.raw["echoes"] == 50_000 and tx.raw["echo_bad"] == 0,
                    f"tx got {tx.raw['echoes']} echoes back, {tx.raw['echo_bad']} bad")
        print(f"echo mode over veth/af_packet: rtt_us {tx.raw['rtt_us']}")

    def _wait_traffic(self, tx, rx, mode: str) -> None:
        """Until a statistics line shows messages through: rx's 'delivered N' (stream, echo)
        or tx's 'N round trips' (pingpong), N > 0. (A line alone does not: on a loaded
        machine the first come before the two nodes have heard each other.)"""
        proc, pat = ((tx.proc, re.compile(r"pingpong: [1-9]\d* round trips")) if mode == "pingpong"
                     else (rx.proc, re.compile(r"delivered [1-9]")))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not any(pat.search(line) for line in proc.lines("stdout")):
            self.verify(time.monotonic() < deadline, f"{mode}: no message went through in {READY_TIMEOUT_S} s")
            time.sleep(0.05)

    def test_a_killed_receiver_is_declared_dead_within_the_bound(self, link) -> None:
        """
        Steps:
            For stream, pingpong and echo: start rx, then an endless tx with
            --dead-after-ms 500; once messages went through (rx's statistics say it
            delivered some, or tx's that round trips were made), SIGKILL rx.
        Verify:
            tx ends on its own within 0.5 s + 3 s of slack, its RESULT says the peer died
            (peer_dead, deaths 1) and counts the messages it dropped unconfirmed.
        """
        tx_if, rx_if = link
        for mode in ("stream", "pingpong", "echo"):
            params = PerfParams(role=Role.RX, msgs=10**9, size=64, mode=mode, peer_mac=tx_if.mac,
                                duration_s=RUN_LIMIT_S, dead_after_ms=500, stats_period_s=0.2)
            rx = self._start(rx_if, params, 1, f"rx-{mode}")
            rx.wait_ready(READY_TIMEOUT_S)
            tx = self._start(tx_if, replace(params, role=Role.TX, peer_mac=rx_if.mac), 0, f"tx-{mode}")
            self._wait_traffic(tx, rx, mode)
            rx.proc.signal(signal.SIGKILL)
            rx.proc.wait(10)
            killed = time.monotonic()
            res = tx.result(timeout=0.5 + 3.0 + 5.0)
            took = time.monotonic() - killed
            eng = res.raw["engine_A"]
            print(f"{mode}: tx ended {took:.2f} s after the kill; deaths {eng['deaths']} "
                  f"discarded {eng['discarded_msgs']}")
            self.verify(res.raw["peer_dead"] and eng["deaths"] == 1 and eng["discarded_msgs"] > 0, f"{mode}: {res.raw}")
            self.verify(took < 0.5 + 3.0, f"{mode}: tx ended {took:.2f} s after the kill")
