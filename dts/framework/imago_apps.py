# SPDX-License-Identifier: BSD-3-Clause
"""Typed wrappers for imago's multi-process mode: imagod as the DPDK primary (``--pair``: nodes
1 and 2 over a net_ring pair, hugepages) and the API examples (``apps/examples``:
``imago-pubsub``, ``imago-reqresp``) as its secondary processes, or embedded.

What the suites read, and nothing else:

* the examples' last stdout line ``RESULT {json}`` (:class:`DeliveryResult`,
  :class:`PublisherResult`, :class:`ServerResult`);
* imagod's periodic ``pools: msgs_in_use=.. frames_in_use=.. big_in_use=.. mbufs_in_use=..``
  lines (:class:`Pools`), its per-endpoint lines (:class:`EndpointLine`), and its reclaim lines
  ``imago: process N of endpoint 'x' is gone: closing it`` /
  ``imago: endpoint 'x' of process N reclaimed, K buffers back`` (:class:`Reclaim`).

imagod leaves its hugepage files (``/dev/hugepages/<prefix>map_*``) behind when it stops
(secondary processes need the files, so it cannot unlink them early); :meth:`ImagodRun.cleanup`
removes them with the runtime directory, and :func:`cleanup_stale_hugepages` removes those of
dead harness runs.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from dataclasses import MISSING, dataclass, field, fields, make_dataclass, replace
from pathlib import Path

import pytest

from framework import host
from framework.apps import (
    AppRun, ContractResult, EalConfig, REPO_ROOT, binary_missing_reason, build_dir, imagod_binary, result_object,
    typed_value,
)
from framework.exceptions import AppError, AppTimeout, ResultError
from framework.node import AppProcess, Node
from framework.testsuite import require
from framework.topology import DPDK_RUNTIME_DIR, tag_pid

HUGEPAGE_DIR = Path("/dev/hugepages")
#: 2 MiB pages imagod and a few secondaries need (pools, rings, mbufs): about 80 in use.
HUGEPAGES_WANTED = 512
HUGEPAGES_MIN_FREE = 128


# ------------------------------------------------------------------ binaries and hugepages
def example_path(name: str) -> Path:
    """``imago-pubsub`` or ``imago-reqresp`` of the build."""
    return build_dir() / "apps" / "examples" / name


def examples_missing_reason() -> str | None:
    """None when imagod and both examples are built, else why not."""
    for b in (imagod_binary(), example_path("imago-pubsub"), example_path("imago-reqresp")):
        reason = binary_missing_reason(b)
        if reason:
            return reason
    return None


def _meminfo(key: str) -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _hugetlbfs_mounted() -> bool:
    try:
        return any(l.split()[1] == str(HUGEPAGE_DIR) and l.split()[2] == "hugetlbfs"
                   for l in Path("/proc/mounts").read_text().splitlines())
    except OSError:
        return False


def hugepages_missing_reason() -> str | None:
    """Make sure imagod can have hugepages: reserve them with scripts/lib.sh's
    ``setup_hugepages`` when there are too few. @return None, or why there are none."""
    if _meminfo("HugePages_Free") < HUGEPAGES_MIN_FREE or not _hugetlbfs_mounted():
        lib = REPO_ROOT / "scripts" / "lib.sh"
        try:
            host.run_cmd(["bash", "-c", f'source "{lib}" && setup_hugepages {HUGEPAGES_WANTED}'], timeout=30,
                         check=False)
        except Exception as e:  # noqa: BLE001 - reported below through the counts
            print(f"setup_hugepages failed: {e}")
    total, free = _meminfo("HugePages_Total"), _meminfo("HugePages_Free")
    if not _hugetlbfs_mounted():
        return f"no hugetlbfs on {HUGEPAGE_DIR} (scripts/lib.sh setup_hugepages could not mount it)"
    if free < HUGEPAGES_MIN_FREE:
        return f"hugepages: {free} of {total} free, imagod needs {HUGEPAGES_MIN_FREE} (setup_hugepages {HUGEPAGES_WANTED})"
    return None


def remove_hugepage_files(file_prefix: str) -> list[Path]:
    """Delete ``/dev/hugepages/<file_prefix>map_*`` (only call once its processes are gone)."""
    gone = []
    for p in HUGEPAGE_DIR.glob(f"{file_prefix}map_*"):
        try:
            p.unlink()
            gone.append(p)
        except OSError:
            pass
    return gone


def cleanup_stale_hugepages(log=print) -> None:
    """Remove hugepage files of harness runs (``imdts<pid>-...``) whose pid is gone."""
    for p in HUGEPAGE_DIR.glob("imdts*map_*"):
        pid = tag_pid(p.name)
        if pid is not None and not Path(f"/proc/{pid}").exists():
            try:
                p.unlink()
                log(f"dts: removed stale hugepage file {p}")
            except OSError:
                pass


# ------------------------------------------------------------------ imagod's lines
_POOLS_RE = re.compile(r"^pools: msgs_in_use=(\d+) frames_in_use=(\d+) big_in_use=(\d+) mbufs_in_use=(\d+)")
_EP_RE = re.compile(r"^\s+endpoint '([^']*)' -> node (\d+) \(pid (\d+)\): sent (\d+) received (\d+) "
                    r"\[inline (\d+) pool (\d+) mbuf (\d+)\] held (\d+) rx_ring_full (\d+) peer (ready|not ready)")
_GONE_RE = re.compile(r"^imago: process (\d+) of endpoint '([^']*)' is gone: closing it")
_RECLAIM_RE = re.compile(r"^imago: endpoint '([^']*)' of process (\d+) reclaimed, (\d+) buffers back")


@dataclass(frozen=True)
class Pools:
    """One ``pools:`` line: buffers out of each pool now."""

    msgs: int
    frames: int
    big: int
    mbufs: int

    @classmethod
    def parse(cls, line: str) -> "Pools | None":
        m = _POOLS_RE.match(line)
        return cls(*map(int, m.groups())) if m else None


@dataclass(frozen=True)
class EndpointLine:
    """One per-endpoint line of imagod's periodic stats."""

    name: str
    peer: int
    pid: int
    sent: int
    received: int
    rx_inline: int
    rx_pool: int
    rx_mbuf: int
    held: int
    rx_ring_full: int
    peer_ready: bool

    @classmethod
    def parse(cls, line: str) -> "EndpointLine | None":
        m = _EP_RE.match(line)
        if not m:
            return None
        g = m.groups()
        return cls(g[0], *map(int, g[1:10]), g[10] == "ready")


@dataclass(frozen=True)
class Reclaim:
    """imagod reclaimed the endpoint @p name of dead process @p pid: @p buffers came back."""

    name: str
    pid: int
    buffers: int


class ImagodRun:
    """One imagod, the primary process: by default ``--pair`` (nodes 1 and 2) with hugepages,
    serving secondary processes; the one wrapper every suite starts imagod through."""

    def __init__(self, proc: AppProcess, file_prefix: str):
        self.proc = proc
        self.file_prefix = file_prefix

    @classmethod
    def start(cls, node: Node, file_prefix: str, *, nodes: list[str] | None = None, eal: EalConfig | None = None,
              stats_period_s: float = 0.5, binary: Path | None = None, name: str = "imagod",
              env: dict[str, str] | None = None) -> "ImagodRun":
        """Start imagod in @p node with EAL prefix @p file_prefix. @p nodes: its node options
        (default ``--pair``; e.g. ``--iface IF --node-id N --peer P``); @p eal: EAL arguments
        before ``--`` (default none: imagod's own, hugepages)."""
        app = (nodes if nodes is not None else ["--pair"]) + ["--stats-period", repr(float(stats_period_s))]
        if eal is None:
            argv = [str(binary or imagod_binary())] + app + ["--file-prefix", file_prefix]
        else:
            argv = [str(binary or imagod_binary())] + replace(eal, file_prefix=file_prefix).argv() + ["--"] + app
        return cls(node.start(argv, name=name, env=env), file_prefix)

    @classmethod
    def for_tools(cls, topology, name: str, request, tools: tuple[str, ...] = (),
                  timeout: float = 30.0) -> tuple[Node, str, "ImagodRun"]:
        """Skip unless every program of @p tools exists; require hugepages; then imagod --pair
        in a new node @p name of @p topology (serving_pair()). @return the node, imagod's
        file prefix, and imagod."""
        for tool in tools:
            if not Path(tool).exists():
                pytest.skip(f"{tool} not installed (scripts/lib.sh installs dpdk and tshark)")
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node(name)
        prefix = f"{topology.prefix}-{name}"
        return node, prefix, cls.serving_pair(node, prefix, request, timeout)

    @classmethod
    def serving_pair(cls, node: Node, file_prefix: str, request, timeout: float = 30.0) -> "ImagodRun":
        """imagod --pair (hugepages, no periodic statistics) in @p node, cleaned up when the
        pytest @p request ends; returns once it serves its two nodes."""
        d = cls.start(node, file_prefix, stats_period_s=0)
        request.addfinalizer(d.cleanup)
        d.proc.wait_for_line("serving 2 node(s)", timeout, stream="stdout")
        return d

    def wait_serving(self, timeout: float = 30.0) -> Pools:
        """Wait for 'serving 2 node(s)' and the first pools line (the baseline); return it."""
        self.proc.wait_for_line("serving 2 node(s)", timeout, stream="stdout")
        return self.wait_pools(lambda p: True, timeout, after=0)

    def lines(self) -> list[str]:
        return self.proc.lines("stdout")

    def pools(self, after: int = 0) -> list[Pools]:
        """Every pools line printed after stdout line index @p after."""
        return [p for p in map(Pools.parse, self.lines()[after:]) if p is not None]

    def endpoints(self, name: str, after: int = 0) -> list[EndpointLine]:
        return [e for e in map(EndpointLine.parse, self.lines()[after:]) if e is not None and e.name == name]

    def reclaims(self) -> list[Reclaim]:
        out = []
        for line in self.lines():
            m = _RECLAIM_RE.match(line)
            if m:
                out.append(Reclaim(m.group(1), int(m.group(2)), int(m.group(3))))
        return out

    def gone(self) -> list[tuple[int, str]]:
        """(pid, endpoint) of every 'process N of endpoint x is gone' line."""
        return [(int(m.group(1)), m.group(2)) for m in map(_GONE_RE.match, self.lines()) if m]

    def wait_until(self, what: str, probe, timeout: float):
        """Poll @p probe() every 0.1 s until it returns something true; return that.
        Raises AppTimeout naming @p what, AppError if imagod exited."""
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got:
                return got
            if not self.proc.running:
                raise AppError(f"imagod exited ({self.proc.returncode}) waiting for {what}; last lines:\n{self.proc.tail()}")
            if time.monotonic() > deadline:
                raise AppTimeout(f"imagod: no {what} within {timeout:.1f} s; last lines:\n{self.proc.tail()}")
            time.sleep(0.1)

    def wait_pools(self, pred, timeout: float, *, after: int) -> Pools:
        """The first pools line after index @p after for which @p pred holds."""
        return self.wait_until("pools line as wanted", lambda: next((p for p in self.pools(after) if pred(p)), None),
                               timeout)

    def wait_reclaim(self, pid: int, timeout: float) -> Reclaim:
        return self.wait_until(f"reclaim of pid {pid}", lambda: next((r for r in self.reclaims() if r.pid == pid), None),
                               timeout)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM; wait for exit. @return its exit code."""
        self.proc.signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stopped_cleanly(self) -> bool:
        return any("stopped cleanly" in l for l in self.lines())

    def cleanup(self) -> None:
        """Kill imagod if it still runs; remove its runtime directory and hugepage files."""
        if self.proc.running:
            self.proc.kill()
        shutil.rmtree(DPDK_RUNTIME_DIR / self.file_prefix, ignore_errors=True)
        remove_hugepage_files(self.file_prefix)


# ------------------------------------------------------------------ the examples' RESULT
@dataclass(frozen=True)
class _Typed:
    """A RESULT object whose fields without defaults are required keys of their type."""

    @classmethod
    def from_json(cls, obj: dict):
        kw = {}
        for f in fields(cls):
            if f.name == "raw":
                continue
            if f.name not in obj:
                if f.default is MISSING:
                    raise ResultError(f"RESULT lacks key {f.name!r}: {obj}")
                continue
            kw[f.name] = typed_value(f.name, f.type, obj[f.name])
        return cls(raw=obj, **kw)

    @classmethod
    def from_stdout(cls, lines: list[str]):
        return cls.from_json(result_object(lines))


#: DESIGN.md's RESULT keys that only the engine can count: the examples sit above it (imagod's
#: node lines have them), so their RESULT has every other key of the contract.
ENGINE_KEYS = ("retransmits", "acks_sent", "nacks_sent")
_DeliveryKeys = make_dataclass("_DeliveryKeys", [(f.name, f.type) for f in fields(ContractResult)
                                                 if f.name not in ENGINE_KEYS and f.name != "raw"], frozen=True)


@dataclass(frozen=True)
class DeliveryResult(_Typed, _DeliveryKeys):
    """A receiving role's RESULT: imago-pubsub sub/both, imago-reqresp client/both; the keys of
    :class:`~framework.apps.ContractResult` but :data:`ENGINE_KEYS`."""

    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @property
    def clean(self) -> bool:
        """Nothing lost, duplicated, reordered or corrupted."""
        return self.lost == self.duplicated == self.reordered == self.corrupted == 0

    def rtt_us(self) -> dict[str, float]:
        """imago-reqresp: the round-trip percentiles p50, p99, p999, max."""
        r = self.raw.get("rtt_us")
        if not isinstance(r, dict) or any(k not in r for k in ("p50", "p99", "p999", "max")):
            raise ResultError(f"RESULT.rtt_us lacks p50/p99/p999/max: {r!r}")
        return {k: typed_value(f"rtt_us.{k}", "float", r[k]) for k in ("p50", "p99", "p999", "max")}


@dataclass(frozen=True)
class PublisherResult(_Typed):
    """imago-pubsub pub's RESULT: what it handed to imago."""

    mode: str
    role: str
    msgs_sent: int
    bytes_sent: int
    duration_s: float
    msgs_per_s: float
    gbps: float
    peer_ready: int
    raw: dict = field(repr=False, compare=False, default_factory=dict)


@dataclass(frozen=True)
class ServerResult(_Typed):
    """imago-reqresp server's RESULT."""

    mode: str
    role: str
    requests_served: int
    raw: dict = field(repr=False, compare=False, default_factory=dict)


# ------------------------------------------------------------------ the examples
@dataclass(frozen=True)
class ExampleParams:
    """The command line of imago-pubsub / imago-reqresp.

    Attributes:
        role: pub|sub|both, or client|server|both.
        secondary: imagod's file prefix (None: embedded).
        node / peer: this process's node and its peer (None: the example's default).
        count: messages (pubsub) or requests (reqresp).
        size: bytes, or "A-B".
        hold: sub: descriptors kept unreleased.
        timeout_s: give up after this long without progress.
        wait: reqresp: sleep in imago_wait() (kind to a 2-core machine) instead of polling.
        zero_copy: pub: imago_buf_alloc() + imago_send_zc().
        name: endpoint name.
    """

    role: str
    secondary: str | None = None
    node: int | None = None
    peer: int | None = None
    count: int | None = None
    size: int | str | None = None
    hold: int | None = None
    timeout_s: float | None = None
    wait: bool = False
    zero_copy: bool = False
    name: str | None = None

    def argv(self) -> list[str]:
        out = [self.role]
        for flag, v in (("--secondary", self.secondary), ("--node", self.node), ("--peer", self.peer),
                        ("--count", self.count), ("--size", self.size), ("--hold", self.hold),
                        ("--timeout", self.timeout_s), ("--name", self.name)):
            if v is not None:
                out += [flag, str(v)]
        out += ["--wait"] * self.wait + ["--zero-copy"] * self.zero_copy
        return out


_RESULT_TYPES = {"pub": PublisherResult, "server": ServerResult}


class ExampleRun(AppRun):
    """One running example; its RESULT type follows its role."""

    def __init__(self, proc: AppProcess, params: ExampleParams):
        super().__init__(proc)
        self.params = params
        self.result_type = _RESULT_TYPES.get(params.role, DeliveryResult)

    def result(self, timeout: float, *, expect_rc: int = 0):
        """Wait for exit (killed after @p timeout s), require @p expect_rc, parse RESULT."""
        rc = self.proc.wait(timeout)
        if rc != expect_rc:
            raise AppError(f"{self.proc.name} exited with {rc}, want {expect_rc}; log {self.log_path}; "
                           f"last lines:\n{self.proc.tail()}")
        try:
            return self.result_type.from_stdout(self.proc.lines("stdout"))
        except ResultError as e:
            raise ResultError(f"{self.proc.name}: {e}; log {self.log_path}; last lines:\n{self.proc.tail()}") from None


def start_example(node: Node, program: str, params: ExampleParams, *, name: str | None = None,
                  binary: Path | None = None, env: dict[str, str] | None = None) -> ExampleRun:
    """Start ``imago-pubsub`` or ``imago-reqresp`` (@p program) in @p node."""
    argv = [str(binary or example_path(program))] + params.argv()
    return ExampleRun(node.start(argv, name=name or f"{program}-{params.role}", env=env), params)


def run_to_completion(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
                      cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a build/install tool (meson, pkg-config, gcc) with a time limit; output captured."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AppTimeout(f"{' '.join(argv)} did not finish within {timeout:.0f} s: {e.stdout!r} {e.stderr!r}") from None


# ------------------------------------------------------------------ telemetry
TELEMETRY_PY = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"


def telemetry(node: Node, prefix: str, cmds: list[str]) -> list[dict]:
    """Run Debian's dpdk-telemetry.py -f PREFIX in @p node with @p cmds on stdin (as an
    operator pipes them); @return one JSON reply per command."""
    cp = node.exec(["/usr/bin/python3", TELEMETRY_PY, "-f", prefix], timeout=30, check=False,
                   stdin_text="".join(c + "\n" for c in cmds))
    replies = [json.loads(line) for line in cp.stdout.splitlines() if line.startswith("{")]
    # The first reply is the socket's greeting (version, pid, max_output_len).
    replies = [r for r in replies if "version" not in r or len(r) != 3]
    assert len(replies) == len(cmds), f"dpdk-telemetry.py: {cp.stdout} {cp.stderr}"
    return [r[c.split(",")[0]] for r, c in zip(replies, cmds)]
