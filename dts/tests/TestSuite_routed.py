# SPDX-License-Identifier: BSD-3-Clause
"""A peer behind a router: ``--peer ID@IP@MAC``, end to end.

Three namespaces: A (10.199.31.2/24), the router R (10.199.31.1 and 10.199.32.1,
``net.ipv4.ip_forward=1``) and B (10.199.32.2/24), joined by two veth pairs; A's and B's
default routes go through R. On A and on B an imagod (hugepages, net_af_packet on the
namespace's veth end, UDP/IPv4 from its own address with ``--src-ip``) runs one node, 1 on A
and 2 on B, whose peer is the other, given as ``ID@<its IP>@<R's MAC on this side>``: the
frames go to the router, which routes them by their IPv4 destination. imago has no ARP; the
kernels of A and B own the addresses and answer R's ARP for them (docs/PROTOCOL.md 1.2). The
traffic is imago-perf ``--attach PREFIX --via api`` secondaries of the two imagods, as an
application's. Before ``ID@IP@MAC``, a UDP peer's unicast frames went to the broadcast MAC,
which a Linux router does not forward: the second test shows that such a run delivers
nothing, so the first one can fail. The third: imago has no path-MTU discovery, and a link on
the way with a smaller MTU than the sender's --mtu stops the stream.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from framework import host
from framework.apps import ImagoPerf, Result, binary_missing_reason, imagod_binary
from framework.imago_apps import ImagodRun, cleanup_stale_hugepages, hugepages_missing_reason
from framework.node import Node
from framework.testsuite import TestSuite, VerifyError, require
from framework.topology import Interface, Topology

A_IP, RA_IP = "10.199.31.2/24", "10.199.31.1/24"
B_IP, RB_IP = "10.199.32.2/24", "10.199.32.1/24"
#: imago's UDP port (docs/PROTOCOL.md 1.2, its default).
IMAGO_PORT = 47000
NODE_A, NODE_B = 1, 2
READY_S = 30.0
#: The stream: messages of SIZE bytes, each checked by imago-perf (sequence number, CRC32C).
MSGS, SIZE = 100_000, 64
#: A bound on the stream (about 3 s here), and the whole of the run that must deliver nothing.
STREAM_LIMIT_S, SILENT_S = 20, 3

#: Run in B's namespace: print LISTENING once bound, then the TTL and the source MAC of the
#: first imago UDP frame from A's address that B's interface receives (a packet socket of the
#: standard library: it sees a copy of what net_af_packet sees).
_SNIFFER = r"""
import socket, struct, sys, time
iface, src, port, limit = sys.argv[1], socket.inet_aton(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind((iface, 0))
s.settimeout(0.2)
print("LISTENING", flush=True)
end = time.monotonic() + limit
while time.monotonic() < end:
    try:
        f, addr = s.recvfrom(4096)
    except socket.timeout:
        continue
    ihl = (f[14] & 15) * 4 if len(f) > 14 else 0
    if addr[2] == socket.PACKET_OUTGOING or len(f) < 14 + ihl + 8 or f[23] != 17 or f[26:30] != src:
        continue
    if struct.unpack("!H", f[14 + ihl + 2:14 + ihl + 4])[0] == port:
        print("FRAME ttl=%d src_mac=%s" % (f[22], f[6:12].hex(":")), flush=True)
        break
"""


def _ip_mib(node: Node, group: str = "Ip") -> dict[str, int]:
    """The @p group counters of @p node's namespace in /proc/net/snmp (Ip: InReceives,
    ForwDatagrams...; Icmp: OutDestUnreachs...)."""
    lines = [l.split() for l in node.exec(["cat", "/proc/net/snmp"]).stdout.splitlines()
             if l.startswith(group + ":")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}


def _node_counters(d: ImagodRun, node_id: int) -> dict[str, int]:
    """The last ``node N counters: k=v ...`` line of a stopped imagod (printed as it stops)."""
    lines = [l for l in d.lines() if l.startswith(f"node {node_id} counters:")]
    if not lines:
        raise VerifyError(f"imagod printed no counters of node {node_id}:\n{d.proc.tail()}")
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])}


class TestSuiteRouted(TestSuite):
    """Two imagods in two subnets, a Linux router between them."""

    @staticmethod
    def _build(topology: Topology, perf_binary, r_mtu: int | None = None) -> dict:
        """A -- R -- B, R forwarding, default routes via R (R's end of the R-B link at MTU @p r_mtu,
        B's at 1500: a path narrower than either end); hugepages for imagod."""
        reason = binary_missing_reason(imagod_binary())
        if reason:
            pytest.skip(f"imagod unavailable: {reason}")
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        a, r, b = topology.add_node("a"), topology.add_node("r"), topology.add_node("b")
        a_if, ra_if = topology.add_veth(a, r, a_ipv4=A_IP, b_ipv4=RA_IP)
        b_if, rb_if = topology.add_veth(b, r, a_ipv4=B_IP, b_ipv4=RB_IP)
        if r_mtu is not None:
            host.ip("link", "set", "dev", rb_if.name, "mtu", str(r_mtu), netns=r.netns)
        topology.set_sysctl(r, {"net.ipv4.ip_forward": "1"})
        topology.add_route(a, "default", ra_if.ip)
        topology.add_route(b, "default", rb_if.ip)
        return {"topology": topology, "perf": perf_binary, "a": a_if, "ra": ra_if, "b": b_if, "rb": rb_if}

    @pytest.fixture
    def routed(self, topology: Topology, perf_binary) -> dict:
        """A -- R -- B, every link's MTU 1500."""
        return self._build(topology, perf_binary)

    def _imagod(self, request, topo: Topology, port: Interface, node_id: int, peer: str,
                extra: tuple[str, ...] = ()) -> ImagodRun:
        """imagod on @p port: UDP from its own address, one node, its one --peer."""
        prefix = f"{topo.prefix}-{port.node.name}"
        d = ImagodRun.start(port.node, prefix, nodes=["--iface", port.name, "--src-ip", str(port.ip),
                                                      "--node-id", str(node_id), "--peer", peer, *extra],
                            stats_period_s=0, name=f"imagod{node_id}")
        request.addfinalizer(d.cleanup)
        d.proc.wait_for_line("serving 1 node(s)", READY_S, stream="stdout")
        return d

    def _stream(self, routed: dict, duration_s: int, size: int = SIZE) -> tuple[Result, Result]:
        """imago-perf --attach: rx on B (READY first), then tx on A; @return their RESULTs."""
        common = ["--via", "api", "--mode", "stream", "--msgs", str(MSGS), "--size", str(size),
                  "--duration", str(duration_s), "--quiet"]
        a, b = routed["a"], routed["b"]
        prefix = routed["topology"].prefix
        rx = ImagoPerf(b.node, routed["perf"]).start_args(["--attach", f"{prefix}-b", "--role", "rx", *common],
                                                          name="perf-rx")
        rx.wait_ready(READY_S)
        tx = ImagoPerf(a.node, routed["perf"]).start_args(["--attach", f"{prefix}-a", "--role", "tx", *common],
                                                          name="perf-tx")
        t = tx.result(timeout=duration_s + READY_S)
        r = rx.result(timeout=READY_S)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        return t, r

    def test_a_stream_crosses_the_router_to_a_peer_given_as_id_ip_mac(self, routed: dict, request) -> None:
        """
        Steps:
            imagod on A: --src-ip 10.199.31.2 --node-id 1 --peer 2@10.199.32.2@<R's MAC on
            A's side>; on B: --src-ip 10.199.32.2 --node-id 2 --peer 1@10.199.31.2@<R's MAC on
            B's side>. A packet socket on B's interface notes the first imago frame from A.
            imago-perf --attach --via api --role rx on B, then --role tx on A: a stream of
            100000 messages of 64 bytes (at most 20 s). Then both imagods are stopped.
        Verify:
            Every message arrives once, in order, intact (lost, duplicated, reordered,
            corrupted 0; delivered == sent == 100000), both runs ended done. The frames crossed
            R: the one B saw came from R's MAC with TTL 63 (A sent 64), and R's kernel
            forwarded at least as many datagrams as the two nodes received frames. Each node's
            port decoded the routed frames cleanly: it rejected only frames of other
            protocols (ethertype: ARP; ip_protocol: the kernels' ICMP port unreachable, since
            they own the addresses and no socket listens on the imago port), and its
            allow-list dropped none (not_allowed, spoofed 0: each peer is known by its IP).
        """
        topo = routed["topology"]
        a, ra, b, rb = routed["a"], routed["ra"], routed["b"], routed["rb"]
        da = self._imagod(request, topo, a, NODE_A, f"{NODE_B}@{b.ip}@{ra.mac}")
        db = self._imagod(request, topo, b, NODE_B, f"{NODE_A}@{a.ip}@{rb.mac}")
        before = _ip_mib(ra.node)
        sniff = b.node.start([sys.executable, "-c", _SNIFFER, b.name, str(a.ip), str(IMAGO_PORT),
                              str(STREAM_LIMIT_S + READY_S)], name="sniffer")
        sniff.wait_for_line("LISTENING", READY_S, stream="stdout")
        t, r = self._stream(routed, STREAM_LIMIT_S)
        forwarded = _ip_mib(ra.node)["ForwDatagrams"] - before["ForwDatagrams"]
        seen = sniff.wait_for_line("FRAME", READY_S, stream="stdout")
        for d in (da, db):
            self.verify(d.stop() == 0 and d.stopped_cleanly(), f"imagod did not stop cleanly:\n{d.proc.tail()}")
        print(f"B saw: {seen}; R forwarded {forwarded} datagrams")

        self.verify(t.raw["ended"] == "done" and r.raw["ended"] == "done",
                    f"the runs ended {t.raw['ended']} (tx) and {r.raw['ended']} (rx), not done")
        self.verify(t.msgs_sent == MSGS and r.msgs_sent == MSGS and r.msgs_delivered == MSGS,
                    f"tx sent {t.msgs_sent}, rx delivered {r.msgs_delivered} of {r.msgs_sent}, want {MSGS}")
        for key in ("lost", "duplicated", "reordered", "corrupted"):
            self.verify(getattr(r, key) == 0, f"rx {key} = {getattr(r, key)}")
        self.verify(r.bytes_delivered == MSGS * SIZE, f"rx bytes_delivered {r.bytes_delivered}")

        self.verify(seen == f"FRAME ttl=63 src_mac={rb.mac}",
                    f"B's first frame from A: {seen!r}, want TTL 63 from R's MAC {rb.mac}")
        received = t.raw[f"node_{NODE_A}"]["frames_received"] + r.raw[f"node_{NODE_B}"]["frames_received"]
        self.verify(r.raw[f"node_{NODE_B}"]["frames_received"] > 0 and forwarded >= received,
                    f"R forwarded {forwarded} datagrams, the nodes received {received} frames")

        for d, node_id in ((da, NODE_A), (db, NODE_B)):
            c = _node_counters(d, node_id)
            decode = {k[len("link_decode_"):]: v for k, v in c.items()
                      if k.startswith("link_decode_") and k not in ("link_decode_accepted", "link_decode_rejected") and v}
            print(f"node {node_id}: decode rejects {decode}, accepted {c['link_decode_accepted']}")
            self.verify(set(decode) <= {"ethertype", "ip_protocol"} and c["link_decode_accepted"] > 0,
                        f"node {node_id} rejected routed frames: {decode}")
            self.verify(c["link_not_allowed"] == 0 and c["link_spoofed"] == 0,
                        f"node {node_id}: not_allowed {c['link_not_allowed']} spoofed {c['link_spoofed']}")

    def test_a_udp_peer_without_the_routers_mac_gets_nothing(self, routed: dict, request) -> None:
        """
        Steps:
            The same, but each --peer is ID@IP alone (the broadcast MAC, as every UDP peer's
            unicast frames had before ID@IP@MAC), and both imago-perf runs last 3 s.
        Verify:
            Nothing is delivered and neither node received a frame of the other; R received
            their frames (InReceives grew) and forwarded none (ForwDatagrams unchanged): a
            Linux router does not forward a frame sent to the broadcast MAC.
        """
        topo = routed["topology"]
        a, ra, b = routed["a"], routed["ra"], routed["b"]
        da = self._imagod(request, topo, a, NODE_A, f"{NODE_B}@{b.ip}")
        db = self._imagod(request, topo, b, NODE_B, f"{NODE_A}@{a.ip}")
        before = _ip_mib(ra.node)
        t, r = self._stream(routed, SILENT_S)
        after = _ip_mib(ra.node)
        for d in (da, db):
            self.verify(d.stop() == 0 and d.stopped_cleanly(), f"imagod did not stop cleanly:\n{d.proc.tail()}")
        got = {k: after[k] - before[k] for k in ("InReceives", "ForwDatagrams")}
        print(f"R: {got}")
        self.verify(r.msgs_delivered == 0, f"rx delivered {r.msgs_delivered} messages through the router")
        heard = (t.raw[f"node_{NODE_A}"]["frames_received"], r.raw[f"node_{NODE_B}"]["frames_received"])
        self.verify(heard == (0, 0), f"the nodes received frames: A {heard[0]}, B {heard[1]}")
        self.verify(got["InReceives"] > 0 and got["ForwDatagrams"] == 0,
                    f"R received {got['InReceives']} datagrams and forwarded {got['ForwDatagrams']}")

    def test_a_smaller_mtu_on_the_way_stops_the_stream(self, topology: Topology, perf_binary, request) -> None:
        """
        Steps:
            The same A -- R -- B with R's end of the R-B link at MTU 1000 (A's and B's
            interfaces at 1500), peers given as ID@IP@MAC; imagod on A and on B with the
            default --mtu 1500 (more than the path carries; the ends agree, so their HELLOs,
            which fit, make a session). A stream of messages of 1000 bytes (a frame each, more
            than 1000 bytes of IP) for 3 s.
        Verify:
            Nothing is delivered: imago has no path-MTU discovery, and R drops every data
            frame (DF set) with an ICMP "fragmentation needed" to A (R's Icmp OutDestUnreachs
            grew), which A's port counts as link_decode_ip_protocol.
        """
        routed = self._build(topology, perf_binary, r_mtu=1000)
        a, ra, b, rb = routed["a"], routed["ra"], routed["b"], routed["rb"]
        self.verify(rb.mtu == 1000 and b.mtu == 1500 and a.mtu == 1500, f"MTUs: {a.mtu} {rb.mtu} {b.mtu}")
        before = _ip_mib(ra.node, "Icmp")
        da = self._imagod(request, topology, a, NODE_A, f"{NODE_B}@{b.ip}@{ra.mac}")
        db = self._imagod(request, topology, b, NODE_B, f"{NODE_A}@{a.ip}@{rb.mac}")
        t, r = self._stream(routed, SILENT_S, size=1000)
        unreach = _ip_mib(ra.node, "Icmp")["OutDestUnreachs"] - before["OutDestUnreachs"]
        for d in (da, db):
            self.verify(d.stop() == 0 and d.stopped_cleanly(), f"imagod did not stop cleanly:\n{d.proc.tail()}")
        ip_protocol = _node_counters(da, NODE_A)["link_decode_ip_protocol"]
        print(f"R sent {unreach} ICMP destination unreachable; A's port counted {ip_protocol} ip_protocol")
        self.verify(r.msgs_delivered == 0 and r.raw["ended"] == "duration",
                    f"rx delivered {r.msgs_delivered} messages of 1000 bytes over a 1000-byte MTU, ended {r.raw['ended']}")
        self.verify(t.raw[f"node_{NODE_A}"]["frames_sent"] > 0 and unreach > 0,
                    f"A sent {t.raw[f'node_{NODE_A}']['frames_sent']} frames, R {unreach} ICMP unreachable")
        self.verify(ip_protocol >= unreach // 2,
                    f"A's port counted {ip_protocol} ip_protocol rejects for R's {unreach} ICMP messages")
