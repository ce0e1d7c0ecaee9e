# SPDX-License-Identifier: BSD-3-Clause
"""Two networks between two nodes (NASA KSC's dual network, reliability/redundancy/).

Nodes ``tx`` and ``rx`` are joined twice: network A through bridge br1, network B through
bridge br2, each bridge in a switch namespace of its own. Each node is one imago-perf process
on two net_af_packet ports (network A's and B's) with ``--redundancy MODE``; the sender
streams numbered, checksummed messages at a fixed rate (the seed's telemetry stream) and the
receiver checks each one.

While the stream runs, the test breaks network A from outside, as an operator or a failing
switch would: its switch port goes down (``ip link set down``); nftables on the switch drops
everything network A carries; its switch port flaps every 100 ms; or both networks go down
and only B comes back. In every mode and every case the receiver must get every message once,
in order, intact, and the sender must never declare its peer dead. Each run prints the
longest wait between two deliveries (``max_gap_us``: what the fail-over cost) and the
networks' counters.
"""

from __future__ import annotations

import json
import shutil
import threading
import time

import pytest

from framework import host
from framework.apps import ImagoPerf, PerfRun, Result
from framework.imago_apps import ImagodRun
from framework.testsuite import TestSuite, require
from framework.topology import Bridge, Interface, Topology

READY_TIMEOUT_S = 30.0
RATE = 20_000          # messages per second
MSGS = 80_000          # four seconds of stream
SIZE = 256
PULL_AT_S = 1.0        # when network A is broken, after the stream started
RUN_LIMIT_S = 60.0
MODES = ("active-standby", "duplicate", "ping-pong")
# Heartbeat intervals (1 ms) of silence that take a network down: 20, not the default 3, so a
# process the scheduler leaves off its core for a few ms (two busy-polling processes and the
# harness on a 2-core runner) does not read as a dead network; no test here times detection.
NET_MISS = 20


class TestSuiteRedundancy(TestSuite):
    """A stream survives losing one network, every way and in every mode."""

    @pytest.fixture(params=MODES)
    def mode(self, request) -> str:
        return request.param

    @pytest.fixture
    def nets(self, topology: Topology, perf_binary) -> tuple[Bridge, Bridge]:
        tx, rx = topology.add_node("tx"), topology.add_node("rx")
        return topology.add_bridge([tx, rx], mtu=1500), topology.add_bridge([tx, rx], mtu=1500)

    # ------------------------------------------------------------ the stream
    def _start(self, node: str, nets: tuple[Bridge, Bridge], mode: str, lcore: int,
               net_miss: int = NET_MISS) -> PerfRun:
        a, b = nets
        me, other = a.port(node), a.port("rx" if node == "tx" else "tx")
        me_b, other_b = b.port(node), b.port("rx" if node == "tx" else "tx")
        peer_id = 2 if node == "tx" else 1
        eal = ["-l", str(lcore), "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry",
               "--file-prefix", f"{me.node.topology.prefix}-{node}-red",
               f"--vdev=net_af_packet0,iface={me.name}", f"--vdev=net_af_packet1,iface={me_b.name}",
               "--log-level=lib.*:warning"]
        app = ["--mode", "rate", "--role", node, "--msgs", str(MSGS), "--size", str(SIZE), "--rate", str(RATE),
               "--duration", str(RUN_LIMIT_S), "--idle-timeout-ms", "8000", "--dead-after-ms", "8000",
               "--peer-mac", other.mac, "--redundancy", mode, "--peer-b", f"{peer_id}@{other_b.mac}",
               "--stats-period", "0.5", "--net-miss", str(net_miss)]
        perf = ImagoPerf(me.node)
        return PerfRun(me.node.start([str(perf.binary)] + eal + ["--"] + app, name=f"perf-{node}"), None, None)

    def _run(self, nets: tuple[Bridge, Bridge], mode: str, pull, lcores: tuple[int, int] = (1, 0),
             net_miss: int = NET_MISS) -> tuple[Result, Result]:
        """Stream tx -> rx; call @p pull() PULL_AT_S after tx started. @return both RESULTs;
        self.pull_done_us is the wall-clock time pull() returned."""
        rx = self._start("rx", nets, mode, lcores[0], net_miss)
        rx.wait_ready(READY_TIMEOUT_S)
        tx = self._start("tx", nets, mode, lcores[1], net_miss)
        tx.wait_ready(READY_TIMEOUT_S)
        time.sleep(PULL_AT_S)
        pulled = time.monotonic()
        pull()
        self.pull_done_us = time.time_ns() // 1000
        t = tx.result(timeout=RUN_LIMIT_S + 30)
        r = rx.result(timeout=30)
        print(f"{mode}: pulled {pulled - time.monotonic():.1f} s before the end")
        for name, res in (("tx", t), ("rx", r)):
            eng = res.raw.get("engine_A" if name == "tx" else "engine_B", {})
            print(f"{mode} {name}: net_a {json.dumps(eng.get('net_a'))}")
            print(f"{mode} {name}: net_b {json.dumps(eng.get('net_b'))}")
            print(f"{mode} {name}: events {json.dumps(eng.get('net_events'))} ")
        print(f"{mode}: rx max_gap_us {r.raw.get('max_gap_us')} delay_us {r.raw.get('delay_us')}")
        return t, r

    def _verify(self, tx: Result, rx: Result) -> None:
        self.verify(not tx.raw["timed_out"] and not rx.raw["timed_out"], "a side hit its --duration")
        self.verify(not tx.raw["peer_dead"], "the sender declared the receiver dead")
        self.verify(tx.msgs_sent == MSGS, f"tx sent {tx.msgs_sent} of {MSGS}")
        self.verify(rx.msgs_delivered == MSGS, f"rx delivered {rx.msgs_delivered} of {MSGS}")
        for key in ("duplicated", "reordered", "corrupted", "lost"):
            self.verify(getattr(rx, key) == 0, f"rx {key} = {getattr(rx, key)}")
        self.verify("max_gap_us" in rx.raw, "no max_gap_us in the receiver's RESULT")

    @staticmethod
    def _net(res: Result, side: str, net: str) -> dict:
        return res.raw[f"engine_{side}"][net]

    @staticmethod
    def _events_after(res: Result, side: str, since_us: int) -> list[dict]:
        """The network events of @p side's engine after wall-clock time @p since_us."""
        eng = res.raw[f"engine_{side}"]
        return [e for e in eng["net_events"] if eng["unix_now_us"] - e["ago_us"] >= since_us]

    # ------------------------------------------------------------ what breaks network A
    @staticmethod
    def _switch_port(br: Bridge, node: str) -> Interface:
        return br.port(node).peer

    def _set_link(self, br: Bridge, up: bool) -> None:
        """Network @p br's switch ports up or down (both members lose carrier)."""
        for node in ("tx", "rx"):
            sw = self._switch_port(br, node)
            host.ip("link", "set", "dev", sw.name, "up" if up else "down", netns=sw.netns)

    def _drop_all(self, br: Bridge) -> None:
        """nftables on network @p br's switch: drop every frame it receives from either member."""
        ns = br.switch.netns
        nft = ["ip", "netns", "exec", ns, "nft"]
        host.run_cmd(nft + ["add", "table", "netdev", "imago_dts"])
        for node in ("tx", "rx"):
            sw = self._switch_port(br, node)
            chain = f"in_{sw.name.replace('-', '_')}"
            host.run_cmd(nft + ["add", "chain", "netdev", "imago_dts", chain,
                                f'{{ type filter hook ingress device "{sw.name}" priority 0; }}'])
            host.run_cmd(nft + ["add", "rule", "netdev", "imago_dts", chain, "counter", "drop"])

    # ------------------------------------------------------------ tests
    def test_network_a_link_down(self, nets, mode) -> None:
        """
        Steps:
            Stream 80000 messages of 256 bytes at 20000/s; after 1 s take network A's switch
            ports down (ip link set down) for the rest of the run.
        Verify:
            rx delivers all 80000 once, in order, intact; tx never declares rx dead; tx sees
            network A down toward rx by the end.
        """
        tx, rx = self._run(nets, mode, lambda: self._set_link(nets[0], False))
        self._verify(tx, rx)
        self.verify(self._net(tx, "A", "net_a")["state_name"] == "down", f"tx: net_a {self._net(tx, 'A', 'net_a')}")

    def test_network_a_dropped_by_nftables(self, nets, mode) -> None:
        """
        Steps:
            As test_network_a_link_down, but network A stays up and nftables on its switch
            drops every frame from either member (the link looks fine, nothing gets through).
        Verify:
            As test_network_a_link_down; the nftables rules did drop frames.
        """
        if shutil.which("nft") is None:
            require("nft (Debian nftables) is not installed")
        tx, rx = self._run(nets, mode, lambda: self._drop_all(nets[0]))
        self._verify(tx, rx)
        self.verify(self._net(tx, "A", "net_a")["state_name"] == "down", f"tx: net_a {self._net(tx, 'A', 'net_a')}")
        out = host.run_cmd(["ip", "netns", "exec", nets[0].switch.netns, "nft", "list", "table", "netdev",
                            "imago_dts"]).stdout
        self.verify("counter packets 0 " not in out, f"an nftables rule dropped nothing: {out}")

    def test_network_a_flaps_every_100ms(self, nets, mode) -> None:
        """
        Steps:
            As test_network_a_link_down, but network A's switch ports go down and up every
            100 ms for 2 s, then stay up.
        Verify:
            rx delivers all 80000 once, in order, intact; tx never declares rx dead.
        """
        stop = threading.Event()

        def flap() -> None:
            end = time.monotonic() + 2.0
            up = False
            while time.monotonic() < end and not stop.is_set():
                self._set_link(nets[0], up)
                up = not up
                time.sleep(0.1)
            self._set_link(nets[0], True)

        th = threading.Thread(target=flap)
        try:
            tx, rx = self._run(nets, mode, th.start)
        finally:
            stop.set()
            if th.is_alive() or th.ident is not None:
                th.join()
        self._verify(tx, rx)

    def test_both_networks_down_then_b_back(self, nets, mode) -> None:
        """
        Steps:
            As test_network_a_link_down, but both networks go down for 1 s; then network B
            comes back and A stays down.
        Verify:
            rx delivers all 80000 once, in order, intact; tx never declares rx dead (its
            --dead-after-ms is 8 s); tx sees A down by the end, and B up again after it came
            back.
        """
        def pull() -> None:
            self._set_link(nets[0], False)
            self._set_link(nets[1], False)
            time.sleep(1.0)
            self._set_link(nets[1], True)

        tx, rx = self._run(nets, mode, pull)
        self._verify(tx, rx)
        self.verify(self._net(tx, "A", "net_a")["state_name"] == "down", f"tx: net_a {self._net(tx, 'A', 'net_a')}")
        back = [e for e in self._events_after(tx, "A", self.pull_done_us) if e["net"] == "b" and e["state"] == "up"]
        self.verify(back, f"tx never saw network B up again: {tx.raw['engine_A']['net_events']}")

    def test_two_healthy_networks_stay_up_with_defaults(self, nets, mode) -> None:
        """
        Steps:
            The stream of test_network_a_link_down, nothing broken, with the default
            --net-miss (3), both processes on one lcore (CPU 1): each is off its core for
            milliseconds at a time, often between its heartbeat on A and the one on B.
        Verify:
            Everything delivered; on both sides no network went down (no event), failovers
            is 0 on both networks, and neither ends down (an outside tester, idle nodes sharing a
            core: B down for whole runs, failovers 1, no heartbeat lost).
        """
        tx, rx = self._run(nets, mode, lambda: None, lcores=(1, 1), net_miss=3)
        self._verify(tx, rx)
        for res, side in ((tx, "A"), (rx, "B")):
            eng = res.raw[f"engine_{side}"]
            downs = [e for e in eng["net_events"] if e["state"] == "down"]
            self.verify(not downs, f"{side}: a healthy network went down: {eng['net_events']}")
            for net in ("net_a", "net_b"):
                self.verify(eng[net]["failovers"] == 0 and eng[net]["state_name"] != "down",
                            f"{side} {net}: {eng[net]}")

    # ------------------------------------------------------------ miswiring, said in a line
    def _imagod(self, topology: Topology, port: Interface, node_id: int, opts: list[str]) -> ImagodRun:
        prefix = f"{topology.prefix}-wire{node_id}"
        d = ImagodRun.start(port.node, prefix, nodes=["--no-huge", "--node-id", str(node_id), "--duration", "4",
                                                      *opts], stats_period_s=0, name=f"imagod{node_id}")
        self.request.addfinalizer(d.cleanup)
        return d

    @pytest.mark.parametrize("wiring", ["crossed", "one-network-peer"])
    def test_imagod_says_when_the_networks_are_miswired(self, topology: Topology, request, wiring: str) -> None:
        """
        Steps:
            Two imagods --no-huge, nodes 1 and 2 joined by two veth pairs (networks A and B),
            both --redundancy duplicate. crossed: node 2's --iface is on network B's cable and
            its --iface-b on A's. one-network-peer: node 2 runs on network A alone, without
            --redundancy. Each runs 4 s.
        Verify:
            Each node that drops the other's frames says why in one line: crossed, node 2
            "dropped N frames in a peer's name ... (link_spoofed): networks A and B crossed";
            one-network-peer, node 1 "... without a valid two-network shim (net_bad_shim)" and
            node 2 "... of an unknown wire version (reject_bad_version)". Nothing of the kind
            where the wiring is right (node 1, crossed); both stop cleanly.
        """
        self.request = request
        n1, n2 = topology.add_node("w1"), topology.add_node("w2")
        a1, a2 = topology.add_veth(n1, n2)
        b1, b2 = topology.add_veth(n1, n2)
        mode = ["--redundancy", "duplicate"]
        d1 = self._imagod(topology, a1, 1, ["--iface", a1.name, "--iface-b", b1.name, *mode,
                                            "--peer", f"2@{a2.mac}", "--peer-b", f"2@{b2.mac}"])
        if wiring == "crossed":
            d2 = self._imagod(topology, b2, 2, ["--iface", b2.name, "--iface-b", a2.name, *mode,
                                                "--peer", f"1@{a1.mac}", "--peer-b", f"1@{b1.mac}"])
        else:
            d2 = self._imagod(topology, a2, 2, ["--iface", a2.name, "--peer", f"1@{a1.mac}"])
        for d in (d1, d2):
            self.verify(d.proc.wait(30) == 0 and d.stopped_cleanly(), f"imagod: {d.proc.tail()}")
        said = {n: [ln for ln in d.lines() if ln.startswith(f"imago: node {n} dropped")] for n, d in ((1, d1), (2, d2))}
        print(json.dumps(said, indent=1))
        want = {1: [], 2: ["(link_spoofed): networks A and B crossed"]} if wiring == "crossed" else \
               {1: ["(net_bad_shim)"], 2: ["(reject_bad_version)"]}
        for n, keys in want.items():
            self.verify(len(said[n]) == len(keys), f"node {n} said {said[n]}, wanted a line for each of {keys}")
            for key in keys:
                self.verify(any(key in ln for ln in said[n]), f"node {n} never said {key}: {said[n]}")
