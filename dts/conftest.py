# SPDX-License-Identifier: BSD-3-Clause
"""pytest glue of imago DTS: host checks, the testbed fixtures, log keeping.

Fixtures:
    dts_host: session-wide check that we are root and ``ip netns`` / veth work; every test
        that builds a topology is SKIPPED with the reason otherwise.
    log_dir: a directory for the logs of one test's apps, under
        ``dts/output/<timestamp>-<pid>/<test>/`` (``$IMAGO_DTS_OUTPUT`` moves the root).
        Kept, and its files listed in the failure report, when the test fails; deleted when it
        passes or is skipped.
    topology: an empty :class:`~framework.topology.Topology` whose apps log into ``log_dir``;
        torn down when the test ends, whatever happened.
    perf_binary: path of imago-perf; the test is SKIPPED when it is missing.

Leftovers of dead runs (``imdts<pid>-*`` whose pid is gone) are removed at session start.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from framework import host
from framework.apps import ImagoPerf, perf_binary as _perf_binary
from framework.node import LogDir
from framework.testsuite import require
from framework.topology import Topology, cleanup_stale, install_cleanup_handlers, netns_supported

DTS_DIR = Path(__file__).resolve().parent


def _output_root() -> Path:
    env = os.environ.get("IMAGO_DTS_OUTPUT")
    return Path(env).resolve() if env else DTS_DIR / "output"


def pytest_configure(config: pytest.Config) -> None:
    config._dts_run_dir = _output_root() / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    config._dts_kept = []  # log dirs of failed tests, for the summary


def pytest_sessionstart(session: pytest.Session) -> None:
    if host.is_root():
        install_cleanup_handlers()
        try:
            cleanup_stale(log=lambda m: print(m))
        except Exception as e:  # noqa: BLE001 - a broken host shows up in dts_host instead
            print(f"dts: stale cleanup failed: {e}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run_dir: Path = session.config._dts_run_dir
    for d in (run_dir, run_dir.parent):
        try:
            d.rmdir()  # only if empty: no test kept its logs
        except OSError:
            break


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if config._dts_kept:
        terminalreporter.section("dts logs kept (failed tests)")
        for nodeid, d in config._dts_kept:
            terminalreporter.write_line(f"{nodeid}: {d}")
            for f in sorted(Path(d).glob("*")):
                terminalreporter.write_line(f"    {f}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
    ld: LogDir | None = getattr(item, "_dts_log_dir", None)
    if rep.failed and ld is not None:
        parts = [f"log directory: {ld.path}"]
        for f in ld.files():
            parts.append(f"--- {f} (last 30 lines) ---")
            try:
                parts.extend(f.read_text(errors="replace").splitlines()[-30:])
            except OSError as e:
                parts.append(f"(unreadable: {e})")
        rep.sections.append(("dts logs", "\n".join(parts)))


def _failed(item: pytest.Item) -> bool:
    if getattr(item, "_dts_keep", False):
        return True
    return any(getattr(getattr(item, f"rep_{w}", None), "failed", False) for w in ("setup", "call"))


@pytest.fixture(scope="session")
def dts_host() -> None:
    """Skip unless we are root and namespaces + veth pairs work."""
    require(netns_supported())


@pytest.fixture(scope="session")
def perf_binary() -> Path:
    """Path of imago-perf; skip when it is missing."""
    reason = ImagoPerf.missing_reason()
    if reason:
        pytest.skip(f"imago-perf unavailable: {reason}")
    return _perf_binary()


@pytest.fixture
def log_dir(request: pytest.FixtureRequest) -> LogDir:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("/")[-1])[:120]
    ld = LogDir(request.config._dts_run_dir / name)
    request.node._dts_log_dir = ld

    def finish() -> None:
        if _failed(request.node):
            request.config._dts_kept.append((request.node.nodeid, str(ld.path)))
        else:
            ld.remove()

    request.addfinalizer(finish)
    return ld


@pytest.fixture
def topology(dts_host, log_dir: LogDir, request: pytest.FixtureRequest) -> Topology:
    topo = Topology(log_dir=log_dir)

    def teardown() -> None:
        try:
            topo.teardown()
        except Exception:
            request.node._dts_keep = True
            raise

    request.addfinalizer(teardown)
    return topo
