# SPDX-License-Identifier: BSD-3-Clause
"""Peers that die or restart under a running application: two imagods, two namespaces.

Node 1 (imagod in ``a``) and node 2 (imagod in ``b``) talk over net_af_packet on a veth pair;
a publisher attaches to node 1 and a subscriber to node 2, both as secondary processes. When
node 2's imagod is SIGKILLed, node 1 must declare it dead within its --dead-after-ms and tell
the publisher which of its messages were dropped unconfirmed; when node 2 comes back, node 1
must take the new incarnation (a reset, nothing stale delivered to it) and flow again.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from framework.imago_apps import (
    ExampleParams, ImagodRun, cleanup_stale_hugepages, examples_missing_reason, hugepages_missing_reason, remove_hugepage_files,
    start_example,
)
from framework.testsuite import TestSuite, require
from framework.topology import Topology

READY_S = 30
ENDLESS = 1_000_000_000


@pytest.fixture(scope="module")
def two_daemon_host() -> None:
    reason = examples_missing_reason() or hugepages_missing_reason()
    require(reason and f"imagod / examples / hugepages unavailable: {reason}")
    cleanup_stale_hugepages()


def _wait(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.1)


def _endpoint_received(daemon) -> int:
    """Messages received by the newest endpoint line of imagod @p daemon (0: none yet)."""
    got = [int(m.group(1)) for m in map(_RECEIVED_RE.search, daemon.lines("stdout")) if m]
    return got[-1] if got else 0


def _node_counter(daemon, name: str) -> int:
    """Counter @p name of the newest "node N counters:" line of imagod @p daemon (0: none)."""
    for line in reversed(daemon.lines("stdout")):
        if " counters: " in line:
            fields = dict(kv.split("=", 1) for kv in line.split(": ", 1)[1].split())
            return int(fields.get(name, 0))
    return 0


_RECEIVED_RE = re.compile(r"^  endpoint '[^']*' -> node \d+ \(pid \d+\): sent \d+ received (\d+)")


class TestSuiteRestart(TestSuite):
    """A peer node's death and restart, seen by an application of the survivor."""

    def _daemon(self, node, iface, node_id: int, peer: int, dead_ms: int, name: str, stats_s: float = 0.5):
        """imagod node @p node_id on @p iface with its own EAL defaults (hugepages, lcores
        0-1, file prefix = the topology's prefix + @p name). @return (process, prefix)."""
        prefix = f"{node.topology.prefix}-{name}"
        proc = ImagodRun.start(node, prefix, nodes=["--iface", iface.name, "--node-id", str(node_id), "--peer",
                                                    str(peer), "--dead-after-ms", str(dead_ms)],
                               stats_period_s=stats_s, name=name).proc
        proc.wait_for_line("serving 1 node(s)", READY_S, stream="stdout")
        return proc, prefix

    def test_dead_then_restarted_peer(self, two_daemon_host, topology: Topology) -> None:
        """
        Steps:
            imagod node 1 in a (--dead-after-ms 1500), imagod node 2 in b; an endless
            publisher of 200-byte messages on node 1, a subscriber on node 2. Once messages
            flow, SIGKILL node 2's imagod (its subscriber gets an error). Wait until node 1
            declares node 2 dead. Start node 2's imagod again and a new subscriber; wait for
            the publisher's peer to be ready again and messages to flow; SIGINT the publisher.
        Verify:
            Node 1 declared node 2 dead within 1.5 s + 2 s of slack; the publisher's RESULT
            has peer_deaths 1 and peer_resets 1 (the new incarnation), and msgs_unconfirmed =
            last_unconfirmed_count > 0, a range that ends before the last message it sent;
            the new subscriber receives messages (the flow resumed with the new incarnation).
        """
        a, b = topology.add_node("a"), topology.add_node("b")
        if_a, if_b = topology.add_veth(a, b)
        da, prefix_a = self._daemon(a, if_a, 1, 2, 1500, name="imagod1")
        db, prefix_b = self._daemon(b, if_b, 2, 1, 1500, name="imagod2")
        try:
            sub = start_example(b, "imago-pubsub", ExampleParams(role="sub", secondary=prefix_b, node=2, peer=1,
                                                                  count=ENDLESS, size=200), name="sub1")
            sub.wait_ready(READY_S)
            pub = start_example(a, "imago-pubsub", ExampleParams(role="pub", secondary=prefix_a, node=1, peer=2,
                                                                  count=ENDLESS, size=200), name="pub")
            pub.proc.wait_for_line("pub: peer ready", READY_S, stream="stdout")
            _wait(lambda: _endpoint_received(db) > 1000, READY_S, "messages flowing")
            db.signal(signal.SIGKILL)
            db.wait(10)
            sub.proc.wait(10)
            pub.proc.wait_for_line("pub: peer gone", 1.5 + 2.0, stream="stdout")
            db, _ = self._daemon(b, if_b, 2, 1, 1500, name="imagod2")
            sub2 = start_example(b, "imago-pubsub", ExampleParams(role="sub", secondary=prefix_b, node=2, peer=1,
                                                                   count=ENDLESS, size=200), name="sub2")
            sub2.wait_ready(READY_S)
            _wait(lambda: sum("pub: peer ready" in ln for ln in pub.proc.lines("stdout")) >= 2, READY_S,
                  "the publisher's peer ready again")
            _wait(lambda: _endpoint_received(db) > 1000, READY_S, "messages to the new incarnation")
            pub.proc.signal(signal.SIGINT)
            res = pub.result(READY_S)
            print(f"\npublisher RESULT {res.raw}")
            raw = res.raw
            self.verify(raw["peer_deaths"] == 1, f"peer_deaths {raw['peer_deaths']}, want 1")
            self.verify(raw["peer_resets"] == 1, f"peer_resets {raw['peer_resets']}: the new incarnation")
            # Node 2 died with messages in flight: dropped, and said which (the last ones taken
            # before the death, so the range ends before what was sent to the new incarnation).
            self.verify(raw["msgs_unconfirmed"] > 0 and raw["msgs_unconfirmed"] == raw["last_unconfirmed_count"],
                        f"{raw}")
            end = raw["last_unconfirmed_first"] + raw["last_unconfirmed_count"] - 1
            self.verify(raw["last_unconfirmed_first"] >= 1 and end < raw["msgs_sent"],
                        f"unconfirmed range {raw['last_unconfirmed_first']}..{end}, sent {raw['msgs_sent']}")
            sub2.proc.signal(signal.SIGINT)
            got = sub2.proc.wait(10)
            self.verify(any("RESULT" in line and '"msgs_delivered":0,' not in line for line in sub2.proc.lines("stdout")),
                        f"the new subscriber received nothing (exit {got})")
        finally:
            for p in (da, db):
                if p.running:
                    p.kill()
            for prefix in (prefix_a, prefix_b):
                remove_hugepage_files(prefix)

    def test_a_restart_within_a_second_connects_within_a_second(self, two_daemon_host, topology: Topology) -> None:
        """
        Steps:
            imagod node 1 in a and node 2 in b (statistics every 0.1 s); wait until they
            handshake. SIGKILL node 1's imagod and start it again at once (well within the
            second, so a clock in seconds would give it the same epoch). Then a new
            publisher on node 1 and subscriber on node 2 exchange 20000 messages.
        Verify:
            Node 2 takes the new incarnation (its resets counter becomes 1) within 1 s of the
            new imagod serving, never declares node 1 dead, and the new pair delivers every
            message once, in order, intact.
        """
        a, b = topology.add_node("a"), topology.add_node("b")
        if_a, if_b = topology.add_veth(a, b)
        da, prefix_a = self._daemon(a, if_a, 1, 2, 3000, name="imagod1")
        db, prefix_b = self._daemon(b, if_b, 2, 1, 3000, name="imagod2", stats_s=0.1)
        try:
            _wait(lambda: _node_counter(db, "hellos_sent") > 0 and _node_counter(db, "pkts_received") > 0, READY_S,
                  "the handshake")
            killed = time.monotonic()
            da.signal(signal.SIGKILL)
            da.wait(10)
            da, _ = self._daemon(a, if_a, 1, 2, 3000, name="imagod1")
            serving = time.monotonic()
            print(f"\nnode 1 back {serving - killed:.2f} s after the kill")
            _wait(lambda: _node_counter(db, "resets") >= 1, 5, "node 2 taking the new incarnation")
            took = time.monotonic() - serving
            print(f"node 2 reset its session {took:.2f} s after node 1 served again")
            self.verify(took < 1.0, f"node 2 took the new incarnation {took:.2f} s after it started")
            self.verify(_node_counter(db, "deaths") == 0, "node 2 declared node 1 dead")
            sub = start_example(b, "imago-pubsub", ExampleParams(role="sub", secondary=prefix_b, node=2, peer=1,
                                                                  count=20_000, size="16-2000", name="again",
                                                                  timeout_s=20), name="sub")
            sub.wait_ready(READY_S)
            pub = start_example(a, "imago-pubsub", ExampleParams(role="pub", secondary=prefix_a, node=1, peer=2,
                                                                  count=20_000, size="16-2000", name="again",
                                                                  timeout_s=20), name="pub")
            res = sub.result(60)
            pub.proc.wait(10)
            self.verify(res.msgs_delivered == 20_000 and res.clean, f"subscriber: {res.raw}")
        finally:
            for p in (da, db):
                if p.running:
                    p.kill()
            for prefix in (prefix_a, prefix_b):
                remove_hugepage_files(prefix)
