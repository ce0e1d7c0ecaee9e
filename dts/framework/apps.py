# SPDX-License-Identifier: BSD-3-Clause
"""Typed wrappers around imago's apps. Suites never write a command line by hand.

:class:`ImagoPerf` drives ``build/apps/imago-perf`` (``$IMAGO_BUILD_DIR/apps/imago-perf`` when
that is set). Its command line is ``imago-perf [EAL args --] app args``: :class:`EalConfig`
builds the EAL part, :class:`RawParams` the app part of ``--mode raw``, and the run's outcome is
read from the one ``RESULT {json}`` line the app prints last (:class:`Result`), never from any
other text.
"""

from __future__ import annotations

import enum
import ipaddress
import json
import math
import os
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from framework.exceptions import AppError, ResultError
from framework.node import AppProcess, Node
from framework.topology import Interface

#: The repository root (dts/ is one of its folders).
REPO_ROOT = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    """``$IMAGO_BUILD_DIR`` (relative paths are taken from the repo root) or ``<repo>/build``."""
    env = os.environ.get("IMAGO_BUILD_DIR")
    if not env:
        return REPO_ROOT / "build"
    p = Path(env)
    return p if p.is_absolute() else REPO_ROOT / p


def perf_binary() -> Path:
    """Where imago-perf is expected."""
    return build_dir() / "apps" / "imago-perf"


# ------------------------------------------------------------------ EAL
def af_packet_vdev(iface: str, mtu: int = 1500) -> str:
    """The ``net_af_packet`` vdev of kernel interface @p iface, its ring frames sized for @p mtu.

    Above 1500 the PMD's ``framesz`` must hold the frame plus the kernel's ring header (34
    bytes before the MAC header), divide ``blocksz`` (a multiple of the 4 KiB page) and stay
    within the mbuf room imago-perf gives it (the frame plus 256 bytes).
    """
    if mtu <= 1500:
        return f"net_af_packet0,iface={iface}"
    framesz = -(-(mtu + 14 + 34) // 1024) * 1024
    blocksz = math.lcm(framesz, 4096)
    return f"net_af_packet0,iface={iface},blocksz={blocksz},framesz={framesz},framecnt=1024"


@dataclass(frozen=True)
class EalConfig:
    """The EAL arguments of one single-node process (no hugepages, no PCI, one vdev).

    Attributes:
        lcores: ``-l`` value, e.g. ``"1"``.
        file_prefix: unique per process; also names its /var/run/dpdk directory.
        vdevs: each becomes ``--vdev=...``.
        memory_mb: ``-m``.
        log_level: ``--log-level``.
    """

    lcores: str
    file_prefix: str
    vdevs: tuple[str, ...] = ()
    memory_mb: int = 512
    log_level: str = "lib.*:warning"
    shared_config: bool = False  #: keep EAL's shared config (imagod's rte_mp channel needs it)

    @classmethod
    def af_packet(cls, *, lcore: int, iface: str, file_prefix: str, **kw) -> "EalConfig":
        """One ``net_af_packet`` port on kernel interface @p iface, one lcore."""
        return cls(lcores=str(lcore), file_prefix=file_prefix, vdevs=(f"net_af_packet0,iface={iface}",), **kw)

    def argv(self) -> list[str]:
        out = ["-l", self.lcores, "--no-huge", "-m", str(self.memory_mb), "--no-pci"]
        out += [] if self.shared_config else ["--no-shconf"]
        out += ["--no-telemetry", "--file-prefix", self.file_prefix]
        out += [f"--vdev={v}" for v in self.vdevs]
        out.append(f"--log-level={self.log_level}")
        return out


# ------------------------------------------------------------------ raw mode
class Role(enum.Enum):
    TX = "tx"
    RX = "rx"


class Encap(enum.Enum):
    L2 = "l2"   #: Ethernet with imago's EtherType
    UDP = "udp"  #: UDP/IPv4


_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


PERF_MODES = ("raw", "raw-pingpong", "stream", "pingpong", "rate", "echo")


@dataclass(frozen=True)
class PerfParams:
    """imago-perf's app arguments for one process: raw modes (frames straight through the port,
    no reliability) and reliable modes (through the engine).

    Attributes:
        role: tx sends, rx counts and checks.
        msgs: messages to send (tx) or expected (rx, used when no end-of-stream frame came).
        size: message size in bytes.
        burst: frames per rx/tx burst.
        encap: L2 (our EtherType) or UDP/IPv4.
        rate_pps: tx pacing in messages per second (None: as fast as possible).
        duration_s: stop after this many seconds.
        idle_timeout_ms: rx stops after this long without a frame once traffic has started.
        stats_period_s: print stats every this many seconds.
        loss: tx drops this fraction of frames in the fault-injection shim (0..1).
        seed: seed of the shim.
        src_ip / dst_ip: IPv4 addresses for UDP encapsulation (given together).
        peer_mac: destination MAC of the frames.
        mode: "raw" / "stream" (one-way: tx sends, rx checks) or "raw-pingpong" / "pingpong"
            (tx pings, rx echoes); the raw ones bypass the reliability engine.
        ping_timeout_us: raw-pingpong: a reply later than this counts as lost.
        mtu: reliable modes: the IP MTU frames are sized for (the link must carry it).
        dead_after_ms: reliable modes: declare the peer dead after this much silence.
        auth_key: file holding the cluster key (``--auth-key``): every frame tagged, untagged
            or wrongly tagged frames dropped.
    """

    role: Role
    msgs: int
    size: int = 64
    burst: int = 32
    encap: Encap = Encap.L2
    rate_pps: int | None = None
    duration_s: float | None = None
    idle_timeout_ms: int | None = None
    stats_period_s: float | None = None
    loss: float | None = None
    seed: int | None = None
    src_ip: ipaddress.IPv4Address | None = None
    dst_ip: ipaddress.IPv4Address | None = None
    peer_mac: str | None = None
    mode: str = "raw"
    ping_timeout_us: int | None = None
    mtu: int | None = None
    dead_after_ms: int | None = None
    auth_key: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role) or not isinstance(self.encap, Encap):
            raise ValueError("role must be a Role and encap an Encap")
        if self.mode not in PERF_MODES:
            raise ValueError(f"mode must be one of {PERF_MODES}: {self.mode!r}")
        if self.msgs <= 0 or self.size <= 0 or self.burst <= 0:
            raise ValueError(f"msgs, size and burst must be positive: {self}")
        if self.rate_pps is not None and self.rate_pps <= 0:
            raise ValueError(f"rate_pps must be positive: {self.rate_pps}")
        if self.loss is not None and not (0.0 <= self.loss <= 1.0):
            raise ValueError(f"loss is a fraction in [0, 1]: {self.loss}")
        if (self.src_ip is None) != (self.dst_ip is None):
            raise ValueError("src_ip and dst_ip go together")
        if self.peer_mac is not None and not _MAC_RE.match(self.peer_mac):
            raise ValueError(f"not a MAC address: {self.peer_mac!r}")
        for name in ("src_ip", "dst_ip"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, ipaddress.IPv4Address):
                object.__setattr__(self, name, ipaddress.IPv4Address(v))

    def argv(self) -> list[str]:
        out = ["--mode", self.mode, "--role", self.role.value, "--msgs", str(self.msgs),
               "--size", str(self.size), "--burst", str(self.burst), "--encap", self.encap.value]
        opt = [
            ("--rate", self.rate_pps),
            ("--duration", self.duration_s),
            ("--idle-timeout-ms", self.idle_timeout_ms),
            ("--stats-period", self.stats_period_s),
            ("--loss", self.loss),
            ("--seed", self.seed),
            ("--ping-timeout-us", self.ping_timeout_us),
            ("--mtu", self.mtu),
            ("--dead-after-ms", self.dead_after_ms),
        ]
        for flag, v in opt:
            if v is not None:
                out += [flag, _num(v)]
        if self.src_ip is not None:
            out += ["--src-ip", str(self.src_ip), "--dst-ip", str(self.dst_ip)]
        if self.peer_mac is not None:
            out += ["--peer-mac", self.peer_mac]
        if self.auth_key is not None:
            out += ["--auth-key", str(self.auth_key)]
        return out


#: The name the raw suites were written with.
RawParams = PerfParams


# ------------------------------------------------------------------ RESULT
@dataclass(frozen=True)
class PortStats:
    """``RESULT.port``: the ethdev counters of the app's port."""

    ipackets: int
    opackets: int
    imissed: int
    ierrors: int


def typed_value(name: str, kind: str, v):
    """@return RESULT value @p v as the dataclass field type @p kind; ResultError otherwise."""
    if kind == "str":
        return str(v)
    if kind == "bool":
        if not isinstance(v, bool):
            raise ResultError(f"RESULT.{name} is not a boolean: {v!r}")
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ResultError(f"RESULT.{name} is not a finite number: {v!r}")
    if kind == "int":
        if float(v) != int(v):
            raise ResultError(f"RESULT.{name} is not an integer: {v!r}")
        return int(v)
    return float(v)


def result_object(lines: list[str]) -> dict:
    """The JSON object of an app's stdout: exactly one RESULT line, the last non-empty one."""
    text = [l for l in lines if l.strip()]
    results = [l for l in text if l.startswith("RESULT ")]
    if not results:
        raise ResultError("no RESULT line on stdout")
    if len(results) > 1:
        raise ResultError(f"{len(results)} RESULT lines on stdout, expected exactly one")
    if text[-1] is not results[0]:
        raise ResultError(f"RESULT is not the last stdout line; after it: {text[-1]!r}")
    return result_line_object(results[0])


def result_line_object(line: str) -> dict:
    """The JSON object of one ``RESULT {json}`` line."""
    if not line.startswith("RESULT "):
        raise ResultError(f"not a RESULT line: {line!r}")
    try:
        obj = json.loads(line[len("RESULT "):])
    except json.JSONDecodeError as e:
        raise ResultError(f"RESULT is not valid JSON ({e}): {line!r}") from None
    if not isinstance(obj, dict):
        raise ResultError(f"RESULT is not a JSON object: {line!r}")
    return obj


@dataclass(frozen=True)
class ContractResult:
    """The keys DESIGN.md ("Machine-readable results") requires of every RESULT line.

    Subclasses add their own keys; fields with defaults are optional, the others required.
    ``raw`` (declared by each subclass, last) holds the whole JSON object.
    """

    mode: str
    role: str
    msgs_sent: int
    msgs_delivered: int
    bytes_delivered: int
    duration_s: float
    msgs_per_s: float
    gbps: float
    lost: int
    duplicated: int
    reordered: int
    corrupted: int
    retransmits: int
    acks_sent: int
    nacks_sent: int

    #: Fields parsed by the subclass itself (nested objects), not by typed_value.
    _nested: ClassVar[tuple] = ()

    @classmethod
    def _scalars(cls, obj: dict) -> dict:
        """Typed values of every required scalar field of @p cls found in @p obj."""
        names = [f for f in fields(cls) if f.name != "raw" and f.name not in cls._nested
                 and f.default is MISSING and f.default_factory is MISSING]
        missing = [f.name for f in names if f.name not in obj]
        if missing:
            raise ResultError(f"RESULT lacks keys {missing}: {obj}")
        return {f.name: typed_value(f.name, f.type, obj[f.name]) for f in names}

    @classmethod
    def from_line(cls, line: str):
        return cls.from_json(result_line_object(line))

    @classmethod
    def from_stdout(cls, lines: list[str]):
        """Parse the app's stdout: exactly one RESULT line, and it is the last non-empty one."""
        return cls.from_json(result_object(lines))


@dataclass(frozen=True)
class Result(ContractResult):
    """The ``RESULT {json}`` line of an imago-perf run; ``raw`` holds the whole object."""

    decode_rejected: int = 0
    port: PortStats | None = None
    raw: dict = field(repr=False, compare=False, default_factory=dict)
    _nested = ("port",)

    @classmethod
    def from_json(cls, obj: dict) -> "Result":
        kw = cls._scalars(obj)
        for name in ("decode_rejected", "port"):
            if name not in obj:
                raise ResultError(f"RESULT lacks keys ['{name}']: {obj}")
        kw["decode_rejected"] = typed_value("decode_rejected", "int", obj["decode_rejected"])
        p = obj["port"]
        keys = ("ipackets", "opackets", "imissed", "ierrors")
        pmissing = [k for k in keys if not isinstance(p, dict) or k not in p]
        if pmissing:
            raise ResultError(f"RESULT.port lacks {pmissing}: {p!r}")
        kw["port"] = PortStats(**{k: typed_value(f"port.{k}", "int", p[k]) for k in keys})
        return cls(raw=obj, **kw)


def binary_missing_reason(b: Path) -> str | None:
    """None if program @p b is there and executable, else why not."""
    if not b.exists():
        return f"{b} not found (build it, or set IMAGO_BUILD_DIR)"
    if not os.access(b, os.X_OK):
        return f"{b} is not executable"
    return None


def help_text(node: Node, binary: Path, timeout: float = 20.0) -> str:
    """``--help`` output of @p binary, run in @p node's namespace."""
    cp = node.exec([str(binary), "--help"], timeout=timeout, check=False)
    return cp.stdout + cp.stderr


# ------------------------------------------------------------------ the app
class AppRun:
    """One running app process whose last stdout line is a RESULT (imago-perf, the peers)."""

    #: The RESULT type: a class with ``from_stdout(lines)``.
    result_type = None

    def __init__(self, proc: AppProcess):
        self.proc = proc

    @property
    def log_path(self) -> Path:
        return self.proc.log_path

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Wait for the ``READY`` line (port up and polling, or listening)."""
        return self.proc.wait_for_line("READY", timeout, stream="stdout")

    def result(self, timeout: float):
        """Wait for exit (killed after @p timeout s), require exit code 0, parse RESULT.

        Raises:
            AppTimeout: still running after @p timeout.
            AppError: non-zero exit code.
            ResultError: no valid RESULT last line.
        """
        rc = self.proc.wait(timeout)
        if rc != 0:
            raise AppError(f"{self.proc.name} exited with {rc}; log {self.log_path}; last lines:\n{self.proc.tail()}")
        try:
            return self.result_type.from_stdout(self.proc.lines("stdout"))
        except ResultError as e:
            raise ResultError(f"{self.proc.name}: {e}; log {self.log_path}; last lines:\n{self.proc.tail()}") from None

    def stop(self) -> None:
        self.proc.kill()


class PerfRun(AppRun):
    """One running imago-perf process."""

    result_type = Result

    def __init__(self, proc: AppProcess, params: PerfParams | None, eal: EalConfig | None):
        super().__init__(proc)
        self.params = params
        self.eal = eal

    def result(self, timeout: float) -> Result:
        return super().result(timeout)


class ImagoPerf:
    """imago-perf, launched inside one node.

    Example::

        perf = ImagoPerf(rx_node)
        run = perf.start_raw(rx_if, RawParams(role=Role.RX, msgs=1000), lcore=1)
        run.wait_ready()
    """

    def __init__(self, node: Node, binary: Path | None = None):
        self.node = node
        self.binary = Path(binary) if binary else perf_binary()

    @staticmethod
    def missing_reason(binary: Path | None = None) -> str | None:
        """None if the binary is there and executable, else why not."""
        return binary_missing_reason(Path(binary) if binary else perf_binary())

    def help_text(self, timeout: float = 20.0) -> str:
        """``imago-perf --help`` output (run in the node's namespace)."""
        return help_text(self.node, self.binary, timeout)

    def start_args(self, app_args: list[str], *, name: str) -> PerfRun:
        """Start imago-perf with @p app_args and no EAL args: its own EAL default, or with
        ``--via api`` the library's (embedded) or imagod's (``--attach``)."""
        return PerfRun(self.node.start([str(self.binary)] + app_args, name=name), None, None)

    def start_raw(
        self,
        port: Interface,
        params: RawParams,
        *,
        lcore: int,
        name: str | None = None,
        memory_mb: int = 512,
    ) -> PerfRun:
        """Start ``--mode raw`` over a net_af_packet port on @p port (an interface of this node)."""
        if port.node is not self.node:
            raise ValueError(f"{port} is not an interface of {self.node}")
        return self.start_raw_vdev(f"net_af_packet0,iface={port.name}", params, lcore=lcore,
                                   name=name, memory_mb=memory_mb)

    def start_raw_vdev(
        self,
        vdev: str,
        params: RawParams,
        *,
        lcore: int,
        name: str | None = None,
        memory_mb: int = 512,
    ) -> PerfRun:
        """Start ``--mode raw`` on the port of any vdev, e.g. ``net_memif0,role=server,socket=...``."""
        name = name or f"perf-{params.role.value}"
        eal = EalConfig(
            lcores=str(lcore),
            file_prefix=f"{self.node.topology.prefix}-{self.node.name}-{name}",
            vdevs=(vdev,),
            memory_mb=memory_mb,
        )
        argv = [str(self.binary)] + eal.argv() + ["--"] + params.argv()
        return PerfRun(self.node.start(argv, name=name), params, eal)


# ------------------------------------------------------------------ the daemon
def imagod_binary() -> Path:
    """Where imagod is expected."""
    return build_dir() / "apps" / "imagod"


def run_app(node: Node, binary: Path, app_args: list[str], timeout: float = 30.0,
            commands: list[str] | None = None):
    """Run an imago app to completion with no EAL args (its embedded default); @p commands,
    if given, are typed at its prompt one per line. @return the completed process."""
    stdin_text = "".join(c + "\n" for c in commands) if commands is not None else None
    return node.exec([str(binary)] + app_args, timeout=timeout, check=False, stdin_text=stdin_text)


def results_in(stdout: str) -> list[Result]:
    """Every RESULT line of an interactive session, in order."""
    return [Result.from_line(line) for line in stdout.splitlines() if line.startswith("RESULT ")]
