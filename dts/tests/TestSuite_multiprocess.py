# SPDX-License-Identifier: BSD-3-Clause
"""imagod and its applications as separate processes: the daemon mode of DESIGN.md.

imagod is the DPDK primary (``--pair``: nodes 1 and 2 over a net_ring pair, on hugepages);
the API examples (``apps/examples``) attach to it as DPDK secondary processes and open
endpoints through rte_mp. A DPDK user expects the messages to arrive verified between two
programs, and a program that is killed (SIGKILL: no clean-up of its own) to cost nothing: the
daemon notices, reclaims every buffer it held, its peer sees the endpoint closed, and the next
program works through the same daemon.

Needs root, hugepages (reserved with ``scripts/lib.sh``'s ``setup_hugepages`` when missing; the
tests are skipped with the reason when that fails) and the built imagod and examples.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

from framework.apps import build_dir, result_line_object
from framework.imago_apps import (
    DeliveryResult, ExampleParams, ImagodRun, Pools, cleanup_stale_hugepages, example_path, examples_missing_reason,
    hugepages_missing_reason, start_example,
)
from framework.node import Node
from framework.testsuite import TestSuite, require
from framework.topology import DPDK_RUNTIME_DIR, Topology

#: The verified stream of the first test; message sizes cover the inline (<= 48 B), pool
#: (<= 512 B) and zero-copy mbuf (> 512 B) tiers.
MSGS = 1_000_000
SIZES = "16-600"
#: The killed subscriber: 1000-byte messages (mbuf tier, and frame-pool copies once its 512
#: mbuf loans are taken), the last HOLD of them never released.
HOLD = 1000
KILL_SIZE = 1000
ENDLESS = 1_000_000_000
#: Endpoints open at once through one imagod (of its 32 slots; the 15th failed before).
MANY_EPS = 24
#: Seconds: attach and READY; a whole 10^6 run on a loaded 2-core machine; imagod's reactions.
READY_S = 30
RUN_S = 240
REACT_S = 15


@pytest.fixture(scope="module")
def multiprocess_host() -> None:
    """Skip unless the binaries are built and hugepages can be had."""
    reason = examples_missing_reason()
    if reason:
        pytest.skip(f"imagod / examples unavailable: {reason}")
    cleanup_stale_hugepages()
    require(hugepages_missing_reason())


@pytest.fixture
def daemon(multiprocess_host, topology: Topology, request: pytest.FixtureRequest) -> tuple[Node, ImagodRun, Pools]:
    """imagod --pair in node ``mp``, serving; with the pools baseline before any application."""
    node = topology.add_node("mp")
    d = ImagodRun.start(node, f"{topology.prefix}-imagod", stats_period_s=0.5)
    request.addfinalizer(d.cleanup)
    base = d.wait_serving(READY_S)
    return node, d, base


#: DPDK 22.11's rte_mp datagram (lib/eal/common/eal_common_proc.c): int type (MP_REQ = 1,
#: MP_REP = 2), then struct rte_mp_msg: name[64], len_param, num_fds, param[256] (its fds[8]
#: travel as SCM_RIGHTS, not in the datagram).
_MP_MSG = struct.Struct("<i64sii256s")
_MP_REQ, _MP_REP = 1, 2
_REQUESTS_RE = re.compile(r"^requests: in (\d+) bad (\d+) dropped (\d+)$")


def _mp_request(prefix: str, action: bytes, param: bytes, timeout: float) -> int | None:
    """Send one rte_mp request to the primary with EAL prefix @p prefix, as a secondary's EAL
    would; @return the type of the answer that came back within @p timeout, or None."""
    rundir = DPDK_RUNTIME_DIR / prefix
    me = rundir / f"mp_socket_{os.getpid()}_dts"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        me.unlink(missing_ok=True)
        sock.bind(str(me))
        sock.settimeout(timeout)
        sock.sendto(_MP_MSG.pack(_MP_REQ, action, len(param), 0, param), str(rundir / "mp_socket"))
        try:
            return _MP_MSG.unpack(sock.recv(_MP_MSG.size + 64)[:_MP_MSG.size])[0]
        except TimeoutError:
            return None
    finally:
        sock.close()
        me.unlink(missing_ok=True)


def _requests(d: ImagodRun) -> tuple[int, int, int] | None:
    """imagod's last ``requests:`` line: (in, bad, dropped)."""
    found = [m for m in map(_REQUESTS_RE.match, d.lines()) if m]
    return tuple(map(int, found[-1].groups())) if found else None


def _pubsub(where: Node, prefix: str, role: str, name: str | None = None, **kw):
    """imago-pubsub @p role as a secondary of the imagod with file prefix @p prefix."""
    return start_example(where, "imago-pubsub", ExampleParams(role=role, secondary=prefix, **kw), name=name)


def _endless_flow(where: Node, d: ImagodRun, tag: str):
    """An endless subscriber (node 2) and publisher (node 1) of imagod @p d, once messages flow."""
    sub = _pubsub(where, d.file_prefix, "sub", name=f"sub-{tag}", node=2, count=ENDLESS, size=200)
    sub.wait_ready(READY_S)
    pub = _pubsub(where, d.file_prefix, "pub", name=f"pub-{tag}", node=1, count=ENDLESS, size=200)
    pub.proc.wait_for_line("pub: peer ready", READY_S, stream="stdout")
    d.wait_until("messages flowing", lambda: any(e.received > 10_000 for e in d.endpoints("pubsub")), READY_S)
    return pub, sub


class TestSuiteMultiprocess(TestSuite):
    """imagod with secondary-process applications: verified delivery, SIGKILL reclaim."""

    def test_pubsub_million_verified_messages(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair; note the pools line before any application attached. Start
            imago-pubsub sub (node 2) and, once it is READY, pub (node 1), both secondaries:
            10^6 messages of 16..600 bytes, each carrying its sequence number and a checksum.
        Verify:
            The subscriber got all 10^6, none lost, duplicated, reordered or corrupted, as many
            bytes as the publisher sent, in all three tiers (inline, pool, mbuf); both exit 0;
            imagod's pools come back to the baseline; SIGTERM stops imagod with exit 0 and
            'stopped cleanly'.
        """
        node, d, base = daemon
        sub = _pubsub(node, d.file_prefix, "sub", node=2, count=MSGS, size=SIZES, timeout_s=60)
        sub.wait_ready(READY_S)
        pub = _pubsub(node, d.file_prefix, "pub", node=1, count=MSGS, size=SIZES, timeout_s=60)
        pub_res = pub.result(RUN_S)
        res: DeliveryResult = sub.result(RUN_S)
        print(f"\nsub {' '.join(sub.params.argv())}: RESULT {res.raw}\npub: RESULT {pub_res.raw}")
        self.verify(pub_res.msgs_sent == MSGS, f"publisher sent {pub_res.msgs_sent}, want {MSGS}")
        self.verify(res.msgs_delivered == MSGS, f"delivered {res.msgs_delivered}, want {MSGS}")
        self.verify(res.clean, f"lost {res.lost} duplicated {res.duplicated} reordered {res.reordered} "
                               f"corrupted {res.corrupted}")
        self.verify(res.bytes_delivered == pub_res.bytes_sent,
                    f"bytes delivered {res.bytes_delivered} != sent {pub_res.bytes_sent}")
        tiers = {k: res.raw.get(k, 0) for k in ("rx_inline", "rx_pool", "rx_mbuf")}
        self.verify(all(v > 0 for v in tiers.values()), f"a tier was never used: {tiers}")
        after = len(d.lines())
        back = d.wait_pools(lambda p: p == base, REACT_S, after=after)
        self.verify(back == base, f"pools {back} != baseline {base}")
        self.verify(d.stop() == 0 and d.stopped_cleanly(), f"imagod did not stop cleanly:\n{d.proc.tail()}")

    def test_killed_subscriber_is_reclaimed(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair (pools baseline), a subscriber on node 2 that holds its last
            1000 messages unreleased (1000 bytes each), and an endless publisher on node 1.
            Once imagod shows the subscriber holding its 1000, SIGKILL it. Then SIGINT the
            publisher (blocked on the closed peer, its tx ring full). Then run a new
            pub/sub pair on the same endpoint name and a request/response pair through the
            same imagod. SIGTERM imagod.
        Verify:
            imagod says the process is gone and reclaims its endpoint with at least 1000
            buffers back, and keeps running; the publisher prints that its peer went away and
            exits 0 with peer_ready 0; once the publisher is stopped the pools are back at the
            baseline; the new pairs deliver everything, verified (the round trips in order of
            their percentiles); the pools are at the baseline again; imagod exits 0 and says
            'stopped cleanly'.
        """
        node, d, base = daemon
        sub = _pubsub(node, d.file_prefix, "sub", name="sub-held", node=2, count=ENDLESS, size=KILL_SIZE, hold=HOLD)
        sub.wait_ready(READY_S)
        pub = _pubsub(node, d.file_prefix, "pub", node=1, count=ENDLESS, size=KILL_SIZE)
        pub.proc.wait_for_line("pub: peer ready", READY_S, stream="stdout")
        # The subscriber's endpoint is on node 2, towards node 1; imagod names its pid.
        held = d.wait_until(f"subscriber holding {HOLD}", lambda: next(
            (e for e in d.endpoints("pubsub") if e.peer == 1 and e.held >= HOLD and e.received > 10 * HOLD), None),
            READY_S)
        self.verify(held.pid == sub.proc.pid, f"imagod's endpoint pid {held.pid} is not the subscriber {sub.proc.pid}")
        sub.proc.signal(signal.SIGKILL)
        sub.proc.wait(REACT_S)
        rec = d.wait_reclaim(held.pid, REACT_S)
        print(f"\nimagod: {[l for l in d.lines() if l.startswith('imago: ')]}")
        self.verify((held.pid, "pubsub") in d.gone(), f"no 'process {held.pid} ... is gone' line")
        self.verify(rec.buffers >= HOLD, f"reclaimed {rec.buffers} buffers, the subscriber held {HOLD}")
        pub.proc.wait_for_line("pub: peer gone", REACT_S, stream="stdout")
        self.verify(d.proc.running, "imagod died with its application")

        pub.proc.signal(signal.SIGINT)
        pub_res = pub.result(REACT_S)
        self.verify(pub_res.peer_ready == 0 and pub_res.msgs_sent > 10 * HOLD, f"publisher: {pub_res.raw}")
        after = len(d.lines())
        back = d.wait_pools(lambda p: p == base, REACT_S, after=after)
        self.verify(back == base, f"pools {back} != baseline {base}")

        # The same imagod, the same endpoint name: a new pair works, and so does another app.
        sub2 = _pubsub(node, d.file_prefix, "sub", name="sub-again", node=2, count=100_000, size="16-2000", timeout_s=60)
        sub2.wait_ready(READY_S)
        pub2 = _pubsub(node, d.file_prefix, "pub", name="pub-again", node=1, count=100_000, size="16-2000", timeout_s=60)
        self.verify(pub2.result(RUN_S).msgs_sent == 100_000, "second publisher")
        res2: DeliveryResult = sub2.result(RUN_S)
        self.verify(res2.msgs_delivered == 100_000 and res2.clean, f"second subscriber: {res2.raw}")
        srv = start_example(node, "imago-reqresp", ExampleParams(role="server", secondary=d.file_prefix, node=2, wait=True))
        srv.wait_ready(READY_S)
        cli = start_example(node, "imago-reqresp", ExampleParams(role="client", secondary=d.file_prefix, node=1,
                                                                   count=2000, wait=True, timeout_s=30))
        rr: DeliveryResult = cli.result(RUN_S)
        served = srv.result(REACT_S)
        print(f"client: RESULT {rr.raw}\nserver: RESULT {served.raw}")
        rtt = rr.rtt_us()
        self.verify(rr.msgs_delivered == 2000 and rr.clean and served.requests_served == 2000,
                    f"request/response: client {rr.raw}, server {served.raw}")
        self.verify(0 < rtt["p50"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"], f"rtt percentiles out of order: {rtt}")
        back = d.wait_pools(lambda p: p == base, REACT_S, after=len(d.lines()))
        self.verify(back == base, f"pools {back} != baseline {base}")
        rc = d.stop()
        self.verify(rc == 0 and d.stopped_cleanly(), f"imagod exit {rc}:\n{d.proc.tail()}")

    def test_many_endpoints_open_at_once(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair and MANY_EPS subscribers (endless, each its own endpoint name)
            one after another, all attached at once; then SIGINT them.
        Verify:
            Every one opens its endpoint (READY) and exits 0 once stopped; the pools come back
            to the baseline. Before, imagod allocated an endpoint's rings on DPDK's rte_mp
            thread: once they needed EAL's heap to grow (about the 15th endpoint), the growth
            waited for replies only that thread receives, and the open failed with
            "Connection timed out".
        """
        node, d, base = daemon
        subs = [start_example(node, "imago-pubsub", ExampleParams(role="sub", secondary=d.file_prefix, node=2,
                                                                 count=ENDLESS, name=f"many{i}"), name=f"sub-many{i}")
                for i in range(MANY_EPS)]
        for sub in subs:
            sub.wait_ready(READY_S)
        for sub in subs:
            sub.proc.signal(signal.SIGINT)
        for sub in subs:
            self.verify(sub.proc.wait(REACT_S) == 0, f"{sub.proc.name}: exit {sub.proc.returncode}:\n{sub.proc.tail()}")
        back = d.wait_pools(lambda p: p == base, REACT_S, after=len(d.lines()))
        self.verify(back == base, f"pools {back} != baseline {base}")

    def test_malformed_requests_are_answered_and_counted(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair; from outside, as a hostile local process would, send its
            rte_mp socket two malformed requests of imago's action (no parameter; 7 bytes of
            one), then start a subscriber (a good attach and open).
        Verify:
            Each malformed request gets an answer (not silence: a secondary would otherwise
            wait out its retries); imagod's ``requests:`` line counts both as bad and none
            dropped; the subscriber opens; imagod stops cleanly. Before, malformed requests
            were answered but counted nowhere.
        """
        node, d, base = daemon
        for param in (b"", b"\x01" * 7):
            got = _mp_request(d.file_prefix, b"imago_ctl", param, REACT_S)
            self.verify(got == _MP_REP, f"request of {len(param)} bytes: answer type {got}, want {_MP_REP}")
        counted = d.wait_until("requests line with 2 bad", lambda: (r := _requests(d)) and r[1] == 2 and r, REACT_S)
        self.verify(counted[0] >= 2 and counted[2] == 0, f"requests {counted}: want in >= 2, dropped 0")
        sub = _pubsub(node, d.file_prefix, "sub", node=2, count=ENDLESS, size=200)
        sub.wait_ready(READY_S)
        sub.proc.signal(signal.SIGINT)
        self.verify(sub.proc.wait(REACT_S) == 0, f"sub: exit {sub.proc.returncode}:\n{sub.proc.tail()}")
        self.verify(d.stop() == 0 and d.stopped_cleanly(), f"imagod did not stop cleanly:\n{d.proc.tail()}")
        final = _requests(d)
        self.verify(final is not None and final[0] >= counted[0] + 2 and final[1:] == (2, 0),
                    f"requests at stop {final}: want the subscriber's attach and open counted, still 2 bad, 0 dropped")

    def test_a_killed_group_source_leaves_its_member_unfinished_not_failed(self, daemon) -> None:
        """
        Steps:
            imago-group sub (node 2) and pub (node 1) of 5,000,000 messages as secondaries of
            imagod --pair; SIGKILL the publisher 2 s into its stream.
        Verify:
            imagod closes the dead source's endpoint: the member's stream ends 'closed', and
            it exits 0 with what never came as unfinished, none lost silently, duplicated or
            corrupted (before: exit 1, lost_silently 1, an outside tester).
        """
        node, d, base = daemon
        ex = str(example_path("imago-group"))
        common = ["--secondary", d.file_prefix, "--count", "5000000", "--size", "16-3000"]
        sub = node.start([ex, "sub", "--node", "2", "--timeout", "30", *common], name="group-sub")
        sub.wait_for_line("READY", READY_S, stream="stdout")
        pub = node.start([ex, "pub", "--node", "1", *common], name="group-pub")
        sub.wait_for_line("EVENT sub started", READY_S, stream="stdout")
        time.sleep(2.0)
        self.verify(pub.running, "the source finished before it was killed: make its stream longer")
        pub.signal(signal.SIGKILL)
        pub.wait(REACT_S)
        rc = sub.wait(RUN_S)
        res = result_line_object(next(ln for ln in reversed(sub.lines("stdout")) if ln.startswith("RESULT ")))
        print(f"\nmember RESULT {res}")
        got = res["msgs_delivered"]
        self.verify(rc == 0 and res["sources"][0]["ended"] == "closed", f"member exit {rc}: {res}")
        self.verify(0 < got < 5_000_000 and res["lost_silently"] == 0 and res["unfinished"] == 5_000_000 - got
                    and res["duplicated"] == 0 and res["corrupted"] == 0, f"member: {res}")

    def test_a_clean_stop_of_imagod_under_its_applications_ends_them_cleanly(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair, an endless subscriber (node 2) and an endless publisher
            (node 1), both secondaries with no --timeout; once messages flow, SIGTERM imagod.
            Then start imagod again with the same file prefix, and a new subscriber and
            publisher (20000 messages).
        Verify:
            imagod says the applications are still attached, stops cleanly and exits 0 within
            the reaction time; both applications see the error (-ENOTCONN: "Transport endpoint
            is not connected"), print their RESULT and exit non-zero on their own, not killed
            by a signal (imagod freeing the shared memory unmapped it in them: they died of
            SIGSEGV on their next call). The restarted imagod serves new applications, which
            deliver all 20000 verified.
        """
        node, d, _ = daemon
        pub, sub = _endless_flow(node, d, "term")
        rc = d.stop(REACT_S)
        self.verify(rc == 0 and d.stopped_cleanly(), f"imagod exit {rc}:\n{d.proc.tail()}")
        self.verify(any("still attached" in line for line in d.lines()), f"imagod did not say:\n{d.proc.tail()}")
        self._told_imagod_is_gone(pub, sub)
        self._restarted_imagod_serves(node, d.file_prefix, "after-stop")

    def test_applications_of_a_killed_imagod_get_an_error_not_a_hang(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair, an endless subscriber (node 2) and an endless publisher
            (node 1), both secondaries with no --timeout; once messages flow, SIGKILL imagod.
            Then start imagod again with the same file prefix, as an operator would, and a new
            subscriber and publisher (20000 messages).
        Verify:
            Both applications see an error within 10 s (their calls return -ENOTCONN:
            "Transport endpoint is not connected"), print their RESULT and exit non-zero,
            instead of waiting for ever on rings nobody serves. The new applications attach to
            the restarted imagod and deliver all 20000, none lost, duplicated, reordered or
            corrupted.
        """
        node, d, _ = daemon
        pub, sub = _endless_flow(node, d, "orphan")
        d.proc.signal(signal.SIGKILL)
        d.proc.wait(REACT_S)
        self._told_imagod_is_gone(pub, sub)
        self._restarted_imagod_serves(node, d.file_prefix, "restarted")

    def test_a_send_after_imagod_is_known_gone_is_refused(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair and a secondary written against imago.h (ctypes,
            orphan_app.py) with an endpoint to node 2 and nothing to send; SIGKILL imagod.
        Verify:
            Once a receive returned -ENOTCONN (imagod gone), a send returns -ENOTCONN too: a
            message that can never go is not accepted (it returned 0).
        """
        node, d, _ = daemon
        lib = build_dir() / "api" / "libimago.so"
        app = node.start([sys.executable, str(Path(__file__).with_name("orphan_app.py")), str(lib), d.file_prefix],
                         name="orphan")
        app.wait_for_line("READY", READY_S, stream="stdout")
        d.proc.signal(signal.SIGKILL)
        d.proc.wait(REACT_S)
        rc = app.wait(30)
        out = app.lines("stdout")
        self.verify(rc == 0 and f"AFTER recv=-{errno.ENOTCONN} send=-{errno.ENOTCONN}" in out, f"exit {rc}: {out[-3:]}")

    def test_a_send_waiting_for_a_large_buffer_is_told_imagod_died(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair and a secondary written against imago.h (ctypes,
            orphan_app.py big) with both ends of an endpoint, the receiving one never read;
            it sends messages of 3000 bytes until every large buffer is out (-EAGAIN for 1 s),
            then SIGKILL imagod while it goes on sending.
        Verify:
            A send returns -ENOTCONN (the large pool's buffers never come back from a dead
            imagod): it returned -EAGAIN for ever, the check for imagod's death skipped
            when the ring had room and the pool had no buffer.
        """
        node, d, _ = daemon
        lib = build_dir() / "api" / "libimago.so"
        app = node.start([sys.executable, str(Path(__file__).with_name("orphan_app.py")), str(lib), d.file_prefix,
                          "big"], name="orphan-big")
        app.wait_for_line("READY", 30, stream="stdout")
        d.proc.signal(signal.SIGKILL)
        d.proc.wait(REACT_S)
        rc = app.wait(30)
        out = app.lines("stdout")
        self.verify(rc == 0 and f"AFTER send_big=-{errno.ENOTCONN}" in out, f"exit {rc}: {out[-3:]}")

    def test_an_open_waits_for_an_imagod_stopped_a_while_and_is_carried_out_once(self, daemon) -> None:
        """
        Steps:
            Start imagod --pair and a secondary written against imago.h (ctypes,
            stall_app.py) that attaches; SIGSTOP imagod, let the application call imago_open()
            (endpoint "stall" to node 2), SIGCONT imagod 3.5 s later (longer than one 2 s try
            of DPDK's request). The application then opens the same name again, closes the
            first endpoint and opens the name once more.
        Verify:
            The first open returns 0 once imagod runs again (after about 3.5 s, within 5 s):
            it was tried again, not given up (it returned -ENOTCONN and left the endpoint
            open behind the application's back); the second is refused with -EEXIST (the
            retries opened one endpoint, not two); the close returns 0 and the name opens
            again (0): nothing of the stalled requests was left behind.
        """
        node, d, _ = daemon
        lib = build_dir() / "api" / "libimago.so"
        go = node.topology.log_dir.path / f"stall-go-{d.file_prefix}"
        go.unlink(missing_ok=True)
        app = node.start([sys.executable, str(Path(__file__).with_name("stall_app.py")), str(lib), d.file_prefix,
                          str(go)], name="stall")
        app.wait_for_line("ATTACHED", READY_S, stream="stdout")
        d.proc.signal(signal.SIGSTOP)
        try:
            go.touch()
            time.sleep(3.5)
        finally:
            d.proc.signal(signal.SIGCONT)
        rc = app.wait(30)
        out = [line for line in app.lines("stdout") if line.startswith("RESULT ")]
        self.verify(rc == 0 and len(out) == 1, f"exit {rc}: {app.lines('stdout')[-3:]}")
        res = dict(kv.split("=") for kv in out[0].split()[1:])
        print(f"\nstalled imagod: {out[0]}")
        self.verify(res["open"] == "0" and 3.0 <= float(res["open_s"]) < 5.0, f"the stalled open: {out[0]}")
        self.verify(res["again"] == f"-{errno.EEXIST}", f"the same name again: {out[0]}")
        self.verify(res["close"] == "0" and res["reopen"] == "0", f"close and reopen: {out[0]}")

    def _told_imagod_is_gone(self, *apps) -> None:
        """Each of @p apps ends on its own (exit > 0, no signal) with -ENOTCONN and a RESULT."""
        for app in apps:
            rc = app.proc.wait(10)
            err = "\n".join(app.proc.lines("stderr"))
            self.verify(rc is not None and rc > 0, f"{app.proc.name} exited {rc} after imagod went: {err[-300:]}")
            self.verify("not connected" in err, f"{app.proc.name} stderr: {err[-300:]}")
            self.verify(any(line.startswith("RESULT ") for line in app.proc.lines("stdout")),
                        f"{app.proc.name} printed no RESULT")

    def _restarted_imagod_serves(self, node: Node, prefix: str, tag: str) -> None:
        """imagod again with @p prefix: a new subscriber and publisher deliver 20000 verified."""
        again = ImagodRun.start(node, prefix, name=f"imagod-{tag}")
        try:
            again.wait_serving(READY_S)
            n = 20_000
            sub = _pubsub(node, prefix, "sub", name=f"sub-{tag}", node=2, count=n, size=200, timeout_s=60)
            sub.wait_ready(READY_S)
            pub = _pubsub(node, prefix, "pub", name=f"pub-{tag}", node=1, count=n, size=200, timeout_s=60)
            pub.result(RUN_S)
            res: DeliveryResult = sub.result(RUN_S)
            print(f"\nafter imagod's restart: sub RESULT {res.raw}")
            self.verify(res.msgs_delivered == n and res.clean,
                        f"after the restart: delivered {res.msgs_delivered} of {n}, lost {res.lost} "
                        f"duplicated {res.duplicated} reordered {res.reordered} corrupted {res.corrupted}")
        finally:
            again.cleanup()
