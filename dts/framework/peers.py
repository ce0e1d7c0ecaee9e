# SPDX-License-Identifier: BSD-3-Clause
"""Typed wrappers around the comparison peers ``tcp_perf`` and ``zmq_perf`` (bench/peers/).

Both take the same command line (:class:`PeerParams`), print ``READY`` once the server listens,
and end with one ``RESULT {json}`` line (:class:`PeerResult`) with the keys of imago-perf's
RESULT plus ``peer``, ``mode``, ``role``, ``size``, ``wait`` and, for ping-pong clients,
``rtt_us``. The binaries are looked for in ``<build dir>/bench/peers/`` (see
:func:`framework.apps.build_dir`).
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field, fields
from pathlib import Path

from framework.apps import AppRun, ContractResult, binary_missing_reason, build_dir, help_text, typed_value
from framework.exceptions import ResultError
from framework.node import AppProcess, Node


class PeerKind(enum.Enum):
    TCP = "tcp"  #: kernel TCP, TCP_NODELAY, length-prefixed messages
    ZMQ = "zmq"  #: ZeroMQ: PUSH/PULL (stream), REQ/REP (pingpong)

    @property
    def program(self) -> str:
        return f"{self.value}_perf"


class PeerRole(enum.Enum):
    SERVER = "server"  #: binds; receives (stream) or echoes (pingpong)
    CLIENT = "client"  #: connects; sends, and times round trips in pingpong


class PeerMode(enum.Enum):
    STREAM = "stream"
    PINGPONG = "pingpong"


def peer_binary(kind: PeerKind) -> Path:
    """Where the peer program of @p kind is expected."""
    return build_dir() / "bench" / "peers" / kind.program


def tcp_endpoint(ip: ipaddress.IPv4Address | str, port: int) -> str:
    """``ADDR:PORT`` as tcp_perf takes it."""
    return f"{ipaddress.IPv4Address(ip)}:{int(port)}"


def zmq_tcp_endpoint(ip: ipaddress.IPv4Address | str, port: int) -> str:
    """``tcp://ADDR:PORT`` as zmq_perf takes it."""
    return f"tcp://{tcp_endpoint(ip, port)}"


def zmq_ipc_endpoint(path: Path | str) -> str:
    """``ipc:///abs/path``: a Unix socket by path, so it joins processes in any namespaces."""
    p = Path(path)
    if not p.is_absolute():
        raise ValueError(f"ipc socket path must be absolute: {p}")
    return f"ipc://{p}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass(frozen=True)
class PeerParams:
    """The command line of tcp_perf / zmq_perf.

    Attributes:
        role: server (binds) or client (connects).
        endpoint: ``ADDR:PORT`` for tcp_perf; ``tcp://ADDR:PORT`` or ``ipc:///path`` for zmq_perf.
        mode: stream (throughput) or pingpong (round trips).
        msgs: client: messages / round trips to run.
        size: message size in bytes (16 .. 65536), the same on both sides.
        duration_s: client: stop sending after this; server: give up 30 s after it.
        busy_poll: spin on non-blocking calls instead of blocking (RESULT ``wait``).
    """

    role: PeerRole
    endpoint: str
    mode: PeerMode = PeerMode.STREAM
    msgs: int = 100_000
    size: int = 64
    duration_s: float | None = None
    busy_poll: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.role, PeerRole) or not isinstance(self.mode, PeerMode):
            raise ValueError("role must be a PeerRole and mode a PeerMode")
        if not self.endpoint:
            raise ValueError("endpoint is empty")
        if self.msgs <= 0 or not (16 <= self.size <= 65536):
            raise ValueError(f"msgs must be positive and size in 16..65536: {self}")
        if self.duration_s is not None and self.duration_s < 0:
            raise ValueError(f"duration_s must not be negative: {self.duration_s}")

    def argv(self) -> list[str]:
        where = "--bind" if self.role is PeerRole.SERVER else "--connect"
        out = ["--role", self.role.value, where, self.endpoint, "--mode", self.mode.value,
               "--msgs", str(self.msgs), "--size", str(self.size)]
        if self.duration_s is not None:
            out += ["--duration", _num(self.duration_s)]
        if self.busy_poll:
            out.append("--busy-poll")
        return out

    def client(self, endpoint: str | None = None) -> "PeerParams":
        """The matching client of this (server) configuration."""
        return PeerParams(role=PeerRole.CLIENT, endpoint=endpoint or self.endpoint, mode=self.mode,
                          msgs=self.msgs, size=self.size, duration_s=self.duration_s,
                          busy_poll=self.busy_poll)


# ------------------------------------------------------------------ RESULT
@dataclass(frozen=True)
class RttUs:
    """``RESULT.rtt_us``: round-trip percentiles in microseconds."""

    p50: float
    p90: float
    p99: float
    p999: float
    max: float
    min: float
    mean: float


@dataclass(frozen=True)
class PeerResult(ContractResult):
    """The ``RESULT {json}`` line of a peer run; ``raw`` holds the whole object."""

    peer: str = ""
    size: int = 0
    wait: str = ""
    sender_reported: bool = False
    timed_out: bool = False
    rtt_us: RttUs | None = None
    raw: dict = field(repr=False, compare=False, default_factory=dict)
    _nested = ("rtt_us",)

    @classmethod
    def from_json(cls, obj: dict) -> "PeerResult":
        kw = cls._scalars(obj)
        for name, kind in (("peer", "str"), ("size", "int"), ("wait", "str"),
                           ("sender_reported", "bool"), ("timed_out", "bool")):
            if name not in obj:
                raise ResultError(f"RESULT lacks keys ['{name}']: {obj}")
            kw[name] = typed_value(name, kind, obj[name])
        if "rtt_us" in obj:
            r = obj["rtt_us"]
            keys = [f.name for f in fields(RttUs)]
            if not isinstance(r, dict) or any(k not in r for k in keys):
                raise ResultError(f"RESULT.rtt_us lacks some of {keys}: {r!r}")
            kw["rtt_us"] = RttUs(**{k: typed_value(f"rtt_us.{k}", "float", r[k]) for k in keys})
        return cls(raw=obj, **kw)


# ------------------------------------------------------------------ the programs
class PeerRun(AppRun):
    """One running peer process (the server prints READY once it listens)."""

    result_type = PeerResult

    def __init__(self, proc: AppProcess, params: PeerParams):
        super().__init__(proc)
        self.params = params

    def result(self, timeout: float) -> PeerResult:
        return super().result(timeout)


class Peer:
    """tcp_perf or zmq_perf, launched inside one node.

    Example::

        srv = Peer(server_node, PeerKind.TCP).start(PeerParams(role=PeerRole.SERVER, endpoint="10.199.20.1:5201"))
        srv.wait_ready()
        cli = Peer(client_node, PeerKind.TCP).start(srv.params.client())
    """

    def __init__(self, node: Node, kind: PeerKind, binary: Path | None = None):
        self.node = node
        self.kind = kind
        self.binary = Path(binary) if binary else peer_binary(kind)

    @staticmethod
    def missing_reason(kind: PeerKind, binary: Path | None = None) -> str | None:
        """None if the binary is there and executable, else why not."""
        return binary_missing_reason(Path(binary) if binary else peer_binary(kind))

    def help_text(self, timeout: float = 20.0) -> str:
        """``--help`` output (run in the node's namespace)."""
        return help_text(self.node, self.binary, timeout)

    def start(self, params: PeerParams, *, name: str | None = None) -> PeerRun:
        """Start the program with @p params; its log is ``<node>-<name>.log``."""
        name = name or f"{self.kind.value}-{params.role.value}"
        argv = [str(self.binary)] + params.argv()
        return PeerRun(self.node.start(argv, name=name), params)
