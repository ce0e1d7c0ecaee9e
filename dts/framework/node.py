# SPDX-License-Identifier: BSD-3-Clause
"""A node (one network namespace) and the apps launched inside it.

An app runs as ``ip netns exec NS [stdbuf -oL -eL] ARGV...`` in a session of its own, so the
whole process group can be killed. Its stdout and stderr go, line by line as they come, to one
log file per app (``<log dir>/<app name>.log``) and to memory, where :meth:`AppProcess.wait_for_line`
looks for markers such as ``READY``. Every wait has a time limit; :meth:`AppProcess.wait` kills
the process group when the limit passes.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from framework import host
from framework.exceptions import AppError, AppTimeout

if TYPE_CHECKING:
    from framework.topology import Interface, Topology

#: Seconds between SIGTERM and SIGKILL when an app is stopped.
KILL_GRACE_S = 3.0

_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL(None, use_errno=True)  # loaded before any fork
except OSError:  # pragma: no cover - not glibc
    _libc = None


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the harness dies (even by SIGKILL), so a
    killed run leaves no busy-polling app behind. Survives the execs of ip netns exec/stdbuf."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class LogDir:
    """A directory that holds the logs of the apps of one test (or one topology)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._names: set[str] = set()
        self._lock = threading.Lock()

    def new_log(self, name: str) -> Path:
        """A fresh log file path for app @p name (``name.log``, ``name-2.log``, ...)."""
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "app"
        with self._lock:
            cand, n = base, 1
            while cand in self._names:
                n += 1
                cand = f"{base}-{n}"
            self._names.add(cand)
        return self.path / f"{cand}.log"

    def files(self) -> list[Path]:
        return sorted(p for p in self.path.glob("*") if p.is_file())

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class AppProcess:
    """One app running inside a node's namespace, its output captured line by line."""

    def __init__(
        self,
        node: "Node",
        name: str,
        argv: list[str],
        log_path: Path,
        *,
        env: dict[str, str] | None = None,
        line_buffered: bool = True,
    ):
        self.node = node
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        prefix: list[str] = []
        stdbuf = shutil.which("stdbuf")
        if line_buffered and stdbuf:
            # C stdio fully buffers a pipe: without this READY would only show at exit.
            prefix = [stdbuf, "-oL", "-eL"]
        self.full_argv = host.netns_exec_argv(node.netns, prefix + self.argv)
        self._cond = threading.Condition()
        self._lines: list[tuple[str, str]] = []  # (stream, line) in arrival order
        self._open_streams = 2
        self._log: IO[str] = open(log_path, "w", encoding="utf-8", errors="replace")
        self._log.write(f"# node {node.name} (netns {node.netns})\n# argv: {' '.join(self.full_argv)}\n")
        self._log.flush()
        self.started_at = time.monotonic()
        try:
            self.popen = subprocess.Popen(
                self.full_argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own process group: killpg reaches every child
                preexec_fn=_die_with_parent,
                env=env,
            )
        except OSError as e:
            self._log.close()
            raise AppError(f"{name}: cannot start {self.full_argv!r}: {e}") from e
        self._readers = [
            threading.Thread(target=self._pump, args=(self.popen.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(self.popen.stderr, "stderr"), daemon=True),
        ]
        for t in self._readers:
            t.start()

    # ---------------------------------------------------------------- output capture
    def _pump(self, pipe: IO[bytes], stream: str) -> None:
        try:
            for raw in iter(pipe.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self._cond:
                    self._lines.append((stream, line))
                    try:
                        self._log.write(line + "\n")
                        self._log.flush()
                    except ValueError:  # log closed during teardown
                        pass
                    self._cond.notify_all()
        finally:
            pipe.close()
            with self._cond:
                self._open_streams -= 1
                self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def lines(self, stream: str | None = None) -> list[str]:
        """Lines printed so far, from ``"stdout"``, ``"stderr"`` or both (None)."""
        with self._cond:
            return [l for s, l in self._lines if stream is None or s == stream]

    def output(self) -> str:
        return "\n".join(self.lines())

    def tail(self, n: int = 25) -> str:
        return "\n".join(self.lines()[-n:])

    # ---------------------------------------------------------------- waiting
    def wait_for_line(self, marker: str, timeout: float, *, stream: str | None = None) -> str:
        """Wait until a line containing @p marker is printed; return that line.

        Raises:
            AppError: the app closed its output (exited) before printing the marker.
            AppTimeout: @p timeout seconds passed first (the app is left running).
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._cond:
            while True:
                for s, line in self._lines[seen:]:
                    if marker in line and (stream is None or s == stream):
                        return line
                seen = len(self._lines)
                if self._open_streams == 0:
                    try:
                        rc: int | None = self.popen.wait(timeout=KILL_GRACE_S)
                    except subprocess.TimeoutExpired:
                        rc = None
                    raise AppError(
                        f"{self.name} exited with {rc} before printing {marker!r}; "
                        f"log {self.log_path}; last lines:\n{self.tail()}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AppTimeout(
                        f"{self.name}: no line with {marker!r} within {timeout:.1f} s; "
                        f"log {self.log_path}; last lines:\n{self.tail()}"
                    )
                self._cond.wait(min(left, 0.25))

    def wait(self, timeout: float) -> int:
        """Wait for the app to exit and its output to be read; return the exit code.

        Raises:
            AppTimeout: it was still running after @p timeout seconds; its process group was
                killed before raising.
        """
        try:
            rc = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AppTimeout(
                f"{self.name} did not exit within {timeout:.1f} s and was killed; "
                f"log {self.log_path}; last lines:\n{self.tail()}"
            ) from None
        self._join_readers()
        return rc

    def _join_readers(self) -> None:
        # Children that inherited the pipes can keep them open; never wait on them for long.
        for t in self._readers:
            t.join(timeout=KILL_GRACE_S)
        self._close_log()

    def _close_log(self) -> None:
        with self._cond:
            if not self._log.closed:
                self._log.close()

    def signal(self, signum: int) -> None:
        """Send @p signum to the app's process group (if it still runs)."""
        try:
            os.killpg(self.popen.pid, signum)
        except ProcessLookupError:
            pass

    def kill(self, grace: float = KILL_GRACE_S) -> int | None:
        """SIGTERM the process group, SIGKILL it after @p grace seconds; return the exit code."""
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
            # The leader may be gone while children of its group live on: sweep the group.
            # Only right after we signalled it, so the group id cannot have been reused.
            self.signal(signal.SIGKILL)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self._join_readers()
        return self.popen.poll()

    def __repr__(self) -> str:
        return f"AppProcess({self.name!r}, pid={self.popen.pid}, rc={self.popen.poll()})"


class Node:
    """A network namespace created by a :class:`~framework.topology.Topology`.

    Attributes:
        name: the logical name given by the test ("tx", "rx", "h1").
        netns: the namespace's real name (``imdts<run>-<n>-<name>``).
        interfaces: the interfaces the topology put into this namespace, by name.
    """

    def __init__(self, topology: "Topology", name: str, netns: str):
        self.topology = topology
        self.name = name
        self.netns = netns
        self.interfaces: dict[str, "Interface"] = {}
        self.processes: list[AppProcess] = []

    def exec(
        self, argv: list[str], *, timeout: float = host.CMD_TIMEOUT_S, check: bool = True,
        stdin_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a short command inside the namespace and wait for it (output captured)."""
        return host.run_cmd(host.netns_exec_argv(self.netns, argv), timeout=timeout, check=check,
                            stdin_text=stdin_text)

    def start(
        self,
        argv: list[str],
        *,
        name: str,
        env: dict[str, str] | None = None,
        line_buffered: bool = True,
    ) -> AppProcess:
        """Launch @p argv inside the namespace; its output goes to ``<log dir>/<name>.log``."""
        log_path = self.topology.log_dir.new_log(f"{self.name}-{name}")
        proc = AppProcess(self, f"{self.name}/{name}", argv, log_path, env=env, line_buffered=line_buffered)
        self.processes.append(proc)
        return proc

    def stop_all(self) -> None:
        """Kill every app this node launched that still runs."""
        for p in self.processes:
            p.kill()

    def interface(self, name: str) -> "Interface":
        return self.interfaces[name]

    def __repr__(self) -> str:
        return f"Node({self.name!r}, netns={self.netns!r})"
