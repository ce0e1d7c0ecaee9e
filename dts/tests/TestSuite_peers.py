# SPDX-License-Identifier: BSD-3-Clause
"""The comparison peers (bench/peers/): kernel TCP and ZeroMQ between two namespaces.

These are the baselines imago is measured against (issue 5), so they must be right before
their figures mean anything: every message counted, verified and accounted for, round-trip
percentiles in order. The server runs in node ``srv`` (10.199.20.1), the client in node ``cli``
(10.199.20.2), joined by a veth pair; the ipc:// test joins the same two processes by a Unix
socket path instead (a path, unlike an abstract name, is seen from every namespace).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest

from framework.exceptions import ResultError
from framework.peers import (
    Peer, PeerKind, PeerMode, PeerParams, PeerResult, PeerRole, tcp_endpoint, zmq_ipc_endpoint,
    zmq_tcp_endpoint,
)
from framework.testsuite import TestSuite
from framework.topology import Interface, Topology

#: Subnet made up for this suite; it exists only inside its namespaces.
SRV_IP, CLI_IP = "10.199.20.1/24", "10.199.20.2/24"
PORT = 5201
#: Messages of the stream tests and round trips of the ping-pong tests.
STREAM_MSGS = 100_000
PINGS = 5_000
#: Busy-polling REQ/REP on 2 cores: two spinning app threads starve the two libzmq I/O threads,
#: so round trips take milliseconds; fewer keep the test short. The figures are not the point.
PINGS_ZMQ_SPIN = 1_000
SIZE = 64
#: The client stops sending after this; the server gives up 30 s later on its own.
DURATION_S = 30
READY_TIMEOUT_S = 10.0
#: A round trip over a veth is tens of microseconds; a median above this means something broke.
SANE_P50_US = 10_000


def _skip_unless_built(kind: PeerKind) -> None:
    reason = Peer.missing_reason(kind)
    if reason:
        pytest.skip(f"{kind.program} unavailable: {reason}")


class TestSuitePeers(TestSuite):
    """tcp_perf and zmq_perf: stream and ping-pong over a veth pair, zmq also over ipc://."""

    @pytest.fixture
    def link(self, topology: Topology) -> tuple[Interface, Interface]:
        """Nodes srv and cli joined by a veth pair (10.199.20.1 and .2)."""
        srv, cli = topology.add_node("srv"), topology.add_node("cli")
        return topology.add_veth(srv, cli, a_ipv4=SRV_IP, b_ipv4=CLI_IP)

    @pytest.fixture
    def ipc_dir(self):
        """A short directory for ipc:// sockets (Unix socket paths are limited to 107 bytes)."""
        d = Path(tempfile.mkdtemp(prefix="imdts-peers-"))
        yield d
        shutil.rmtree(d, ignore_errors=True)

    # ---------------------------------------------------------------- helpers
    def _run(self, link: tuple[Interface, Interface], kind: PeerKind, server: PeerParams,
             client_endpoint: str | None = None) -> tuple[PeerResult, PeerResult]:
        """Start the server in srv, wait for READY, run the client in cli; return (server,
        client) RESULTs."""
        _skip_unless_built(kind)
        srv_if, cli_if = link
        srv = Peer(srv_if.node, kind).start(server)
        srv.wait_ready(READY_TIMEOUT_S)
        cli = Peer(cli_if.node, kind).start(server.client(client_endpoint))
        cli_res = cli.result(timeout=DURATION_S + 30)
        srv_res = srv.result(timeout=30)
        print(f"{kind.value} server RESULT", json.dumps(srv_res.raw))
        print(f"{kind.value} client RESULT", json.dumps(cli_res.raw))
        for r, role in ((srv_res, "server"), (cli_res, "client")):
            self.verify(r.peer == kind.value and r.role == role and r.mode == server.mode.value,
                        f"RESULT peer/role/mode {r.peer}/{r.role}/{r.mode}")
            self.verify(r.size == server.size, f"{role} size {r.size} != {server.size}")
            self.verify(not r.timed_out, f"{role} stopped on its time limit")
        return srv_res, cli_res

    def _verify_all_delivered(self, srv: PeerResult, cli: PeerResult, msgs: int) -> None:
        """The server got every message once, in order, intact, and knew how many were sent."""
        self.verify(cli.msgs_sent == msgs, f"client sent {cli.msgs_sent} of {msgs}")
        self.verify(srv.sender_reported, "server did not get the end-of-stream message")
        self.verify(srv.msgs_sent == msgs, f"server learned msgs_sent {srv.msgs_sent}, client sent {msgs}")
        self.verify(srv.msgs_delivered == msgs, f"server delivered {srv.msgs_delivered} of {msgs}")
        self.verify(srv.lost == 0 and srv.duplicated == 0 and srv.reordered == 0 and srv.corrupted == 0,
                    f"lost {srv.lost} duplicated {srv.duplicated} reordered {srv.reordered} "
                    f"corrupted {srv.corrupted}")
        self.verify(srv.bytes_delivered == msgs * srv.size, f"bytes_delivered {srv.bytes_delivered}")
        self.verify(srv.duration_s > 0 and srv.msgs_per_s > 0 and srv.gbps > 0,
                    f"rates not positive: {srv.duration_s} s, {srv.msgs_per_s} msg/s, {srv.gbps} Gbit/s")

    def _verify_pingpong(self, srv: PeerResult, cli: PeerResult, pings: int) -> None:
        """Every ping answered intact; the percentiles are ordered and plausible."""
        self.verify(cli.msgs_sent == pings and cli.msgs_delivered == pings,
                    f"client sent {cli.msgs_sent}, got {cli.msgs_delivered} replies of {pings}")
        self.verify(cli.corrupted == 0 and cli.lost == 0, f"corrupted {cli.corrupted} lost {cli.lost}")
        self.verify(srv.msgs_delivered == pings and srv.sender_reported,
                    f"server echoed {srv.msgs_delivered}, sender_reported {srv.sender_reported}")
        rtt = cli.rtt_us
        self.verify(rtt is not None, "client RESULT has no rtt_us")
        self.verify(0 < rtt.min <= rtt.p50 <= rtt.p90 <= rtt.p99 <= rtt.p999 <= rtt.max,
                    f"rtt_us out of order: {rtt}")
        self.verify(rtt.min <= rtt.mean <= rtt.max, f"rtt_us mean outside [min, max]: {rtt}")
        self.verify(rtt.p50 < SANE_P50_US, f"median round trip {rtt.p50} us")
        self.verify(cli.raw.get("rtt_us", {}).get("count") == pings, f"rtt count {cli.raw.get('rtt_us')}")

    # ---------------------------------------------------------------- no root, no binary
    def test_params_argv(self) -> None:
        """The wrapper's command line and its checks.

        Steps:
            * Build the server params of a ping-pong with every option, and its client.
            * Build params with bad values.

        Verify:
            * The vectors are exactly the agreed ones; the client mirrors the server.
            * Bad values raise ValueError; a RESULT without a required key raises ResultError.
        """
        srv = PeerParams(role=PeerRole.SERVER, endpoint=zmq_tcp_endpoint("10.199.20.1", PORT),
                         mode=PeerMode.PINGPONG, msgs=7, size=128, duration_s=2.5, busy_poll=True)
        expected = ["--role", "server", "--bind", "tcp://10.199.20.1:5201", "--mode", "pingpong",
                    "--msgs", "7", "--size", "128", "--duration", "2.5", "--busy-poll"]
        self.verify(srv.argv() == expected, f"{srv.argv()} != {expected}")
        cli = srv.client().argv()
        self.verify(cli[:4] == ["--role", "client", "--connect", "tcp://10.199.20.1:5201"] and cli[4:] == expected[4:],
                    f"client argv {cli}")
        for bad in (dict(msgs=0), dict(size=15), dict(size=65537), dict(endpoint=""), dict(duration_s=-1)):
            with pytest.raises(ValueError):
                PeerParams(**{"role": PeerRole.CLIENT, "endpoint": "1.2.3.4:5", **bad})
        with pytest.raises(ValueError):
            zmq_ipc_endpoint("relative.sock")
        with pytest.raises(ResultError):
            PeerResult.from_stdout(['RESULT {"peer": "tcp"}'])

    # ---------------------------------------------------------------- the programs
    @pytest.mark.parametrize("kind", [PeerKind.TCP, PeerKind.ZMQ], ids=lambda k: k.value)
    def test_help_knows_our_options(self, topology: Topology, kind: PeerKind) -> None:
        """Each peer documents every option the wrapper can pass.

        Steps:
            * Run ``<peer> --help`` inside a node.

        Verify:
            * Every flag PeerParams can emit appears in the help text, and RESULT is named.
        """
        _skip_unless_built(kind)
        text = Peer(topology.add_node("h"), kind).help_text()
        flags = ["--role", "--bind", "--connect", "--mode", "--msgs", "--size", "--duration", "--busy-poll"]
        missing = [f for f in flags + ["RESULT"] if f not in text]
        self.verify(not missing, f"{kind.program} --help lacks {missing}:\n{text}")

    def test_tcp_stream(self, link: tuple[Interface, Interface]) -> None:
        """Kernel TCP: 100000 messages of 64 bytes over the veth, all delivered and verified.

        Steps:
            * Start tcp_perf --role server --bind 10.199.20.1:5201 in srv; wait for READY.
            * Run tcp_perf --role client --connect 10.199.20.1:5201 --msgs 100000 --size 64 in cli.

        Verify:
            * Both exit 0 with a valid RESULT, not timed out.
            * The server learned msgs_sent == 100000 from the end-of-stream message and
              delivered all of them: no loss, duplicate, reordering or corruption.
        """
        srv_ip = link[0].ip
        params = PeerParams(role=PeerRole.SERVER, endpoint=tcp_endpoint(srv_ip, PORT), msgs=STREAM_MSGS,
                            size=SIZE, duration_s=DURATION_S)
        srv, cli = self._run(link, PeerKind.TCP, params)
        self._verify_all_delivered(srv, cli, STREAM_MSGS)

    @pytest.mark.parametrize("busy_poll", [False, True], ids=["sleep", "spin"])
    def test_tcp_pingpong(self, link: tuple[Interface, Interface], busy_poll: bool) -> None:
        """Kernel TCP: 5000 round trips of 64 bytes, blocking and busy-polling.

        Steps:
            * Start the tcp_perf echo server in srv; wait for READY.
            * Run the client in cli: --mode pingpong --msgs 5000 [--busy-poll].

        Verify:
            * Every ping answered intact; the server echoed 5000.
            * rtt_us: 0 < min <= p50 <= p90 <= p99 <= p999 <= max, mean within, p50 < 10 ms,
              5000 samples; RESULT wait is spin or sleep as asked.
        """
        params = PeerParams(role=PeerRole.SERVER, endpoint=tcp_endpoint(link[0].ip, PORT),
                            mode=PeerMode.PINGPONG, msgs=PINGS, size=SIZE, duration_s=DURATION_S,
                            busy_poll=busy_poll)
        srv, cli = self._run(link, PeerKind.TCP, params)
        self._verify_pingpong(srv, cli, PINGS)
        self.verify(cli.wait == ("spin" if busy_poll else "sleep"), f"wait {cli.wait}")

    def test_zmq_stream_tcp(self, link: tuple[Interface, Interface]) -> None:
        """ZeroMQ PUSH/PULL over tcp:// on the veth: 100000 x 64 B, all delivered and verified.

        Steps:
            * Start zmq_perf --role server --bind tcp://10.199.20.1:5201 in srv; wait for READY.
            * Run the PUSH client in cli: --msgs 100000 --size 64.

        Verify:
            * As test_tcp_stream.
        """
        params = PeerParams(role=PeerRole.SERVER, endpoint=zmq_tcp_endpoint(link[0].ip, PORT),
                            msgs=STREAM_MSGS, size=SIZE, duration_s=DURATION_S)
        srv, cli = self._run(link, PeerKind.ZMQ, params)
        self._verify_all_delivered(srv, cli, STREAM_MSGS)

    def test_zmq_stream_ipc(self, link: tuple[Interface, Interface], ipc_dir: Path) -> None:
        """ZeroMQ PUSH/PULL over ipc:// between the two namespaces.

        Steps:
            * Start the PULL server in srv on ipc://<tmp>/zmq.sock; wait for READY.
            * Run the PUSH client in cli on the same path: --msgs 100000 --size 64.

        Verify:
            * As test_tcp_stream.
        """
        params = PeerParams(role=PeerRole.SERVER, endpoint=zmq_ipc_endpoint(ipc_dir / "zmq.sock"),
                            msgs=STREAM_MSGS, size=SIZE, duration_s=DURATION_S)
        srv, cli = self._run(link, PeerKind.ZMQ, params)
        self._verify_all_delivered(srv, cli, STREAM_MSGS)

    @pytest.mark.parametrize("busy_poll", [False, True], ids=["sleep", "spin"])
    def test_zmq_pingpong(self, link: tuple[Interface, Interface], busy_poll: bool) -> None:
        """ZeroMQ REQ/REP over tcp:// on the veth: round trips of 64 bytes, blocking and spinning.

        Steps:
            * Start the REP server in srv on tcp://10.199.20.1:5201; wait for READY.
            * Run the REQ client in cli: --mode pingpong --msgs 5000 (1000 with --busy-poll).

        Verify:
            * As test_tcp_pingpong.
        """
        pings = PINGS_ZMQ_SPIN if busy_poll else PINGS
        params = PeerParams(role=PeerRole.SERVER, endpoint=zmq_tcp_endpoint(link[0].ip, PORT),
                            mode=PeerMode.PINGPONG, msgs=pings, size=SIZE, duration_s=DURATION_S,
                            busy_poll=busy_poll)
        srv, cli = self._run(link, PeerKind.ZMQ, params)
        self._verify_pingpong(srv, cli, pings)
        self.verify(cli.wait == ("spin" if busy_poll else "sleep"), f"wait {cli.wait}")
