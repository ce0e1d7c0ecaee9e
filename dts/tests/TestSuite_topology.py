# SPDX-License-Identifier: BSD-3-Clause
"""Self-test of the harness: namespaces, veth pairs, a bridge, app launch, and cleanup.

Everything here runs inside namespaces the harness creates, on addresses of the made-up subnet
10.199.0.0/16 that exist only inside them.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from framework import host
from framework.exceptions import AppError, AppTimeout
from framework.node import LogDir
from framework.ping import ping
from framework.testsuite import TestSuite
from framework.topology import (
    Topology,
    all_leftovers,
    cleanup_stale,
    run_tag,
)

DTS_DIR = Path(__file__).resolve().parents[1]


def _sysctl(node, key: str) -> str:
    return node.exec(["sysctl", "-n", key]).stdout.strip()


@pytest.mark.usefixtures("dts_host")
class TestSuiteTopology(TestSuite):
    """The testbed the other suites stand on."""

    def test_veth_ping(self, topology: Topology) -> None:
        """Two nodes joined by a veth pair reach each other, and only each other.

        Steps:
            * Create nodes a and b, join them with a veth pair (MTU 1400, 10.199.0.1/24 and
              10.199.0.2/24).
            * Ping b from a and a from b (3 echo requests each).

        Verify:
            * Every echo request is answered.
            * Both ends are up with MTU 1400, IPv6 is disabled on them and in the namespace.
            * Each namespace holds only lo and its veth end.
        """
        a, b = topology.add_node("a"), topology.add_node("b")
        ia, ib = topology.add_veth(a, b, mtu=1400, a_ipv4="10.199.0.1/24", b_ipv4="10.199.0.2/24")

        r = ping(a, "10.199.0.2")
        self.verify(r.ok, f"a -> b: {r.received}/{r.sent} replies\n{r.output}")
        r = ping(b, "10.199.0.1")
        self.verify(r.ok, f"b -> a: {r.received}/{r.sent} replies\n{r.output}")

        for iface in (ia, ib):
            info = host.link_info(iface.name, iface.netns)
            self.verify(info["mtu"] == 1400, f"{iface}: mtu {info['mtu']}, expected 1400")
            self.verify("UP" in info["flags"], f"{iface} is not up: {info['flags']}")
            self.verify(
                _sysctl(iface.node, f"net.ipv6.conf.{iface.name}.disable_ipv6") == "1",
                f"IPv6 is enabled on {iface}",
            )
            self.verify(
                _sysctl(iface.node, "net.ipv6.conf.all.disable_ipv6") == "1",
                f"IPv6 is enabled in {iface.netns}",
            )
            links = sorted(host.link_names(iface.netns))
            self.verify(links == sorted(["lo", iface.name]), f"{iface.netns} holds {links}")
        self.verify(ia.mac != ib.mac, "both veth ends have the same MAC")

    def test_bridge_ping(self, topology: Topology) -> None:
        """Three nodes on a Linux bridge reach each other.

        Steps:
            * Create nodes h1, h2, h3 and a bridge joining them (10.199.1.1-3/24).
            * Ping every other node from every node.

        Verify:
            * Every echo request is answered.
            * The bridge and its ports live in the switch namespace, not in ours.
        """
        nodes = [topology.add_node(n) for n in ("h1", "h2", "h3")]
        addrs = {n.name: f"10.199.1.{i + 1}/24" for i, n in enumerate(nodes)}
        br = topology.add_bridge(nodes, ipv4=addrs)
        for src in nodes:
            for dst in nodes:
                if src is dst:
                    continue
                ip = str(br.port(dst).ip)
                r = ping(src, ip)
                self.verify(r.ok, f"{src.name} -> {dst.name} ({ip}): {r.received}/{r.sent}\n{r.output}")
        ours = host.link_names()
        self.verify(br.name not in ours, f"bridge {br.name} is in the harness's namespace")
        sw_links = host.link_names(br.switch.netns)
        self.verify(br.name in sw_links, f"bridge {br.name} not in {br.switch.netns}: {sw_links}")

    def test_app_launch_and_logs(self, topology: Topology) -> None:
        """An app runs inside its node's namespace; markers, exits and timeouts work.

        Steps:
            * Start a shell in node a that prints to stdout and stderr, prints READY, exits 3.
            * Start one that prints READY and sleeps; wait for its exit with a short timeout.
            * Start one that exits before printing the marker waited for.

        Verify:
            * READY is found; the exit code is 3; both streams are in the log file.
            * The app sees only the namespace's interfaces.
            * The sleeper is killed when its exit times out (AppTimeout), nothing stays in the
              namespace.
            * Waiting for a marker an exited app never printed fails at once (AppError).
        """
        a, b = topology.add_node("a"), topology.add_node("b")
        ia, _ = topology.add_veth(a, b)

        p = a.start(["sh", "-c", "echo to-stdout; echo to-stderr >&2; ip -o link show; echo READY; exit 3"], name="shell")
        line = p.wait_for_line("READY", timeout=10)
        self.verify(line == "READY", f"marker line {line!r}")
        rc = p.wait(timeout=10)
        self.verify(rc == 3, f"exit code {rc}, expected 3")
        log = p.log_path.read_text()
        self.verify("to-stdout" in log and "to-stderr" in log, f"log lacks a stream:\n{log}")
        self.verify(p.lines("stderr") == ["to-stderr"], f"stderr lines {p.lines('stderr')}")
        self.verify(ia.name in log and "lo:" in log, f"app did not see the namespace's links:\n{log}")
        self.verify(p.log_path.parent == topology.log_dir.path, f"log at {p.log_path}")

        s = a.start(["sh", "-c", "echo READY; exec sleep 60"], name="sleeper")
        s.wait_for_line("READY", timeout=10)
        t0 = time.monotonic()
        with pytest.raises(AppTimeout):
            s.wait(timeout=0.5)
        self.verify(time.monotonic() - t0 < 10, "killing the sleeper took too long")
        self.verify(not s.running, "sleeper still runs after its wait timed out")
        self.verify(host.netns_pids(a.netns) == [], f"processes left in {a.netns}")

        q = a.start(["sh", "-c", "echo bye"], name="quitter")
        t0 = time.monotonic()
        with pytest.raises(AppError):
            q.wait_for_line("NEVER", timeout=30)
        self.verify(time.monotonic() - t0 < 10, "an exited app was waited on until the timeout")

    def test_teardown_leaves_nothing(self, log_dir: LogDir) -> None:
        """Teardown removes every namespace and interface, also when the body raises.

        Steps:
            * Build nodes, a veth pair and a bridge in a ``with Topology()`` block, start an
              app, leave the block normally.
            * Do the same again but raise inside the block.

        Verify:
            * After each block nothing with the topology's prefix exists (namespaces, links,
              DPDK runtime directories) and the app is gone.
            * The exception raised in the body reaches the caller unchanged.
        """
        for raise_inside in (False, True):
            names: list[str] = []
            app = None
            try:
                with Topology(log_dir=log_dir) as t:
                    prefix = t.prefix
                    a, b, c = t.add_node("a"), t.add_node("b"), t.add_node("c")
                    t.add_veth(a, b)
                    t.add_bridge([a, b, c])
                    names = t.namespaces()
                    app = c.start(["sh", "-c", "echo READY; exec sleep 60"], name="sleeper")
                    app.wait_for_line("READY", timeout=10)
                    if raise_inside:
                        raise RuntimeError("body failed")
            except RuntimeError as e:
                self.verify(raise_inside and str(e) == "body failed", f"unexpected {e!r}")
            else:
                self.verify(not raise_inside, "the body's exception was swallowed")
            self.verify(len(names) == 4, f"expected 3 nodes + 1 switch namespaces, got {names}")
            left = [ns for ns in host.netns_list() if ns.startswith(prefix)]
            self.verify(left == [], f"namespaces left after teardown: {left}")
            self.verify(t.leftovers() == [], f"leftovers: {t.leftovers()}")
            self.verify(app is not None and not app.running, "app still runs after teardown")
        self.verify(all_leftovers() == [], f"run leftovers: {all_leftovers()}")

    @pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "exit"])
    def test_teardown_on_signal_or_exit(self, how: str) -> None:
        """A harness process that is signalled, or exits without tearing down, cleans up.

        Steps:
            * Start a child Python process that builds a topology (2 nodes, veth, bridge) and
              prints UP.
            * Send it SIGTERM / SIGINT, or let it exit without calling teardown.

        Verify:
            * It exits within 20 s, and nothing with its run tag remains.
        """
        body = textwrap.dedent(
            f"""
            import sys, time
            sys.path.insert(0, {str(DTS_DIR)!r})
            from framework.topology import Topology
            t = Topology()
            a, b = t.add_node("a"), t.add_node("b")
            t.add_veth(a, b)
            t.add_bridge([a, b])
            print("UP", t.prefix, flush=True)
            if {how!r} == "exit":
                sys.exit(0)
            time.sleep(60)
            """
        )
        child = subprocess.Popen(
            [sys.executable, "-c", body], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        tag = run_tag(child.pid)
        try:
            line = child.stdout.readline()  # the child prints UP or dies (bounded by its sleep)
            self.verify(line.startswith("UP"), f"child did not build its topology: {line!r} {child.stderr.read() if child.poll() is not None else ''}")
            self.verify(len(all_leftovers(tag)) > 0, "child's topology not visible")
            if how != "exit":
                child.send_signal(getattr(signal, how))
            child.wait(timeout=20)
            left = all_leftovers(tag)
            self.verify(left == [], f"left after {how}: {left}")
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
            for ns in host.netns_list():  # never leak, even when the test fails
                if ns.startswith(tag + "-"):
                    host.ip("netns", "del", ns, check=False)

    def test_stale_cleanup(self, topology: Topology) -> None:
        """Leftovers of a dead run are removed; a live topology is not.

        Steps:
            * Create a namespace named with the run tag of a pid that no longer runs, and a
              DPDK runtime directory with the same tag.
            * Build a live topology with one node; run the stale cleanup.

        Verify:
            * The dead run's namespace and directory are gone; the live node's namespace stays.
        """
        dead = subprocess.Popen(["true"])
        dead.wait(timeout=10)
        self.verify(not host.pid_alive(dead.pid), "pid of the exited child is alive again")
        stale_ns = f"{run_tag(dead.pid)}-1-x"
        stale_dir = Path("/var/run/dpdk") / f"{run_tag(dead.pid)}-1-x-perf"
        live = topology.add_node("live")
        try:
            host.ip("netns", "add", stale_ns)
            stale_dir.mkdir(parents=True, exist_ok=True)
            removed = cleanup_stale(log=lambda m: None)
            self.verify(f"netns {stale_ns}" in removed, f"stale netns not removed: {removed}")
            self.verify(stale_ns not in host.netns_list(), "stale netns still exists")
            self.verify(not stale_dir.exists(), f"{stale_dir} still exists")
            self.verify(live.netns in host.netns_list(), "stale cleanup removed a live namespace")
        finally:
            host.ip("netns", "del", stale_ns, check=False)
            if stale_dir.exists():
                stale_dir.rmdir()
