# SPDX-License-Identifier: BSD-3-Clause
"""A testbed made of Linux network namespaces joined by veth pairs or a Linux bridge.

Every object the harness creates lives in a namespace it created: a veth pair is created with
both ends already inside their namespaces, and a bridge lives in a namespace of its own (a
"switch" node). Nothing is added to the namespace the harness runs in, and all test traffic
stays inside.

Names carry the run tag ``imdts<pid in base 36>`` (``imdts9ix`` for pid 12345):

* namespaces: ``<tag>-<topology number>-<node name>`` (``imdts9ix-1-tx``);
* interfaces: ``<tag>-v<n>a`` / ``<tag>-v<n>b`` for the two ends of veth pair n, ``<tag>-br<n>``
  for bridge n, all at most 15 characters (IFNAMSIZ - 1);
* DPDK runtime directories of the apps: ``/var/run/dpdk/<tag>-...``.

A topology is always removed: by :meth:`Topology.teardown` (context manager exit, pytest
fixture finalizer), at interpreter exit (``atexit``) and on SIGINT/SIGTERM. :func:`cleanup_stale`
removes what runs that died anyway (SIGKILL, power loss) left behind; the tag says which pid
made them, so live runs are never touched.

IPv6 is disabled in every namespace before any interface enters it, so the kernel sends no
router solicitations or DAD probes into a test's traffic.
"""

from __future__ import annotations

import atexit
import ipaddress
import itertools
import os
import re
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Iterable, Sequence

from framework import host
from framework.exceptions import CommandError, TopologyError
from framework.node import LogDir, Node

#: Every name the harness creates starts with this.
PREFIX = "imdts"
#: Longest interface name Linux accepts (IFNAMSIZ - 1).
IFNAME_MAX = 15
#: Where DPDK keeps the runtime directory of a --file-prefix when run as root.
DPDK_RUNTIME_DIR = Path("/var/run/dpdk")

_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_TAG_RE = re.compile(rf"^{PREFIX}([0-9a-z]+)-")


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def run_tag(pid: int | None = None) -> str:
    """The prefix of every name made by process @p pid (default: this one)."""
    return PREFIX + _b36(os.getpid() if pid is None else pid)


def tag_pid(name: str) -> int | None:
    """The pid encoded in a name made by :func:`run_tag`, or None if it is not one of ours."""
    m = _TAG_RE.match(name)
    return int(m.group(1), 36) if m else None


@dataclass
class Interface:
    """One end of a veth pair inside a node's namespace.

    Attributes:
        name: interface name inside the namespace.
        node: the node whose namespace holds it.
        peer: the other end of the veth pair.
        ipv4: addresses assigned to it (with prefix length).
    """

    name: str
    node: Node
    peer: "Interface | None" = None
    ipv4: list[ipaddress.IPv4Interface] = field(default_factory=list)

    @property
    def netns(self) -> str:
        return self.node.netns

    @property
    def mac(self) -> str:
        """MAC address, read from the kernel."""
        return host.link_info(self.name, self.netns)["address"]

    @property
    def mtu(self) -> int:
        return int(host.link_info(self.name, self.netns)["mtu"])

    @property
    def ip(self) -> ipaddress.IPv4Address:
        """The first IPv4 address (raises if none was assigned)."""
        if not self.ipv4:
            raise TopologyError(f"{self.node.name}/{self.name} has no IPv4 address")
        return self.ipv4[0].ip

    def __repr__(self) -> str:
        return f"Interface({self.node.name}/{self.name})"


@dataclass
class Bridge:
    """A Linux bridge in a switch namespace; each member node has one port (a veth end)."""

    name: str
    switch: Node
    ports: dict[str, Interface] = field(default_factory=dict)  # member node name -> its end

    def port(self, node: Node | str) -> Interface:
        return self.ports[node if isinstance(node, str) else node.name]


# ------------------------------------------------------------------ live-topology registry
_registry_lock = threading.RLock()  # re-entrant: a signal handler may run while it is held
_live: dict[int, "Topology"] = {}
_handlers_installed = False
_prev_handlers: dict[int, object] = {}
_topology_seq = itertools.count(1)


def teardown_all() -> list[str]:
    """Tear down every live topology of this process; return the errors (never raises)."""
    errors: list[str] = []
    with _registry_lock:
        live = list(_live.values())
    for topo in reversed(live):
        try:
            topo.teardown()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            errors.append(f"{topo.prefix}: {e}")
    return errors


def _on_signal(signum: int, frame: FrameType | None) -> None:
    teardown_all()
    prev = _prev_handlers.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # e.g. Python's default SIGINT handler raises KeyboardInterrupt
    elif prev == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def install_cleanup_handlers() -> None:
    """Register the atexit hook and SIGINT/SIGTERM handlers once (main thread only)."""
    global _handlers_installed
    with _registry_lock:
        if _handlers_installed:
            return
        _handlers_installed = True
        atexit.register(teardown_all)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                _prev_handlers[sig] = signal.getsignal(sig)
                signal.signal(sig, _on_signal)


# ------------------------------------------------------------------ the topology
class Topology:
    """Namespaces (nodes) joined by veth pairs and bridges; removed on teardown.

    Use as a context manager, or through the ``topology`` pytest fixture::

        with Topology() as topo:
            a, b = topo.add_node("a"), topo.add_node("b")
            ia, ib = topo.add_veth(a, b, a_ipv4="10.199.0.1/24", b_ipv4="10.199.0.2/24")
    """

    def __init__(self, *, log_dir: Path | LogDir | None = None, tag: str | None = None):
        self.tag = tag or run_tag()
        self.prefix = f"{self.tag}-{next(_topology_seq)}"
        self.nodes: dict[str, Node] = {}
        self.bridges: dict[str, Bridge] = {}
        self._namespaces: list[str] = []  # in creation order, recorded before creation
        self._ifnames: set[str] = set()
        self._veth_seq = itertools.count(0)
        self._bridge_seq = itertools.count(0)
        self._torn_down = False
        self._own_log_dir = log_dir is None
        if log_dir is None:
            self.log_dir = LogDir(Path(tempfile.mkdtemp(prefix=f"{self.prefix}-logs-")))
        else:
            self.log_dir = log_dir if isinstance(log_dir, LogDir) else LogDir(Path(log_dir))
        #: Set by the owner to keep the log directory of a topology that made its own.
        self.keep_logs = False
        install_cleanup_handlers()
        with _registry_lock:
            _live[id(self)] = self

    # -------------------------------------------------------------- context manager
    def __enter__(self) -> "Topology":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.keep_logs = True
            try:
                self.teardown()
            except Exception:  # noqa: BLE001 - do not hide the body's exception
                pass
        else:
            self.teardown()

    # -------------------------------------------------------------- building
    def _check_alive(self) -> None:
        if self._torn_down:
            raise TopologyError(f"topology {self.prefix} was torn down")

    def _ifname(self, name: str) -> str:
        if len(name) > IFNAME_MAX:
            raise TopologyError(f"interface name {name!r} is longer than {IFNAME_MAX} characters")
        if name in self._ifnames:
            raise TopologyError(f"interface name {name!r} already used in {self.prefix}")
        self._ifnames.add(name)
        return name

    def _add_namespace(self, netns: str) -> None:
        self._namespaces.append(netns)  # recorded first: a failure half-way is still cleaned
        host.ip("netns", "add", netns)
        host.sysctl_in_netns(
            netns,
            {
                "net.ipv6.conf.all.disable_ipv6": "1",
                "net.ipv6.conf.default.disable_ipv6": "1",
            },
        )
        host.ip("link", "set", "dev", "lo", "up", netns=netns)

    def add_node(self, name: str) -> Node:
        """Create a namespace for node @p name (lowercase letters and digits, <= 12 chars)."""
        self._check_alive()
        if not _NAME_RE.match(name):
            raise TopologyError(f"node name {name!r}: use [a-z][a-z0-9]*, at most 12 characters")
        if name in self.nodes:
            raise TopologyError(f"node {name!r} already exists")
        netns = f"{self.prefix}-{name}"
        self._add_namespace(netns)
        node = Node(self, name, netns)
        self.nodes[name] = node
        return node

    def _setup_end(
        self, iface: Interface, mtu: int | None, addr: str | ipaddress.IPv4Interface | None
    ) -> None:
        ns = iface.netns
        host.sysctl_in_netns(ns, {f"net.ipv6.conf.{iface.name}.disable_ipv6": "1"})
        if mtu is not None:
            host.ip("link", "set", "dev", iface.name, "mtu", str(mtu), netns=ns)
        if addr is not None:
            self.add_ipv4(iface, addr)
        host.ip("link", "set", "dev", iface.name, "up", netns=ns)

    def add_ipv4(self, iface: Interface, addr: str | ipaddress.IPv4Interface) -> None:
        """Assign @p addr ("10.199.0.1/24") to @p iface inside its namespace."""
        a = ipaddress.IPv4Interface(addr)
        host.ip("addr", "add", str(a), "dev", iface.name, netns=iface.netns)
        iface.ipv4.append(a)

    def add_route(self, node: Node, dest: str, via: str | ipaddress.IPv4Address) -> None:
        """Route @p dest ("default", "10.199.32.0/24") in @p node's namespace through gateway @p via."""
        self._check_alive()
        host.ip("route", "add", dest, "via", str(ipaddress.IPv4Address(via)), netns=node.netns)

    def set_sysctl(self, node: Node, settings: dict[str, str]) -> None:
        """Write sysctls in @p node's namespace only, e.g. ``{"net.ipv4.ip_forward": "1"}`` (a router)."""
        self._check_alive()
        host.sysctl_in_netns(node.netns, settings)

    def _veth(self, a_ns: str, a_name: str, b_ns: str, b_name: str) -> None:
        # Both ends are born inside their namespaces: nothing ever shows in ours.
        host.ip(
            "link", "add", a_name, "netns", a_ns, "type", "veth", "peer", "name", b_name, "netns", b_ns
        )

    def add_veth(
        self,
        a: Node,
        b: Node,
        *,
        mtu: int | None = None,
        a_ipv4: str | None = None,
        b_ipv4: str | None = None,
        a_name: str | None = None,
        b_name: str | None = None,
    ) -> tuple[Interface, Interface]:
        """Join @p a and @p b with a veth pair; both ends up, IPv6 off, optional MTU/addresses.

        Returns:
            (end in a, end in b).
        """
        self._check_alive()
        n = next(self._veth_seq)
        a_name = self._ifname(a_name or f"{self.tag}-v{n}a")
        b_name = self._ifname(b_name or f"{self.tag}-v{n}b")
        self._veth(a.netns, a_name, b.netns, b_name)
        ia, ib = Interface(a_name, a), Interface(b_name, b)
        ia.peer, ib.peer = ib, ia
        a.interfaces[a_name], b.interfaces[b_name] = ia, ib
        self._setup_end(ia, mtu, a_ipv4)
        self._setup_end(ib, mtu, b_ipv4)
        return ia, ib

    def add_bridge(
        self,
        members: Sequence[Node],
        *,
        mtu: int | None = None,
        ipv4: dict[str, str] | None = None,
    ) -> Bridge:
        """Join @p members with a Linux bridge living in a switch namespace of its own.

        Args:
            members: nodes that get one port each (a veth pair: one end in the member, the
                other enslaved to the bridge).
            mtu: MTU of the bridge and of every veth end.
            ipv4: member node name -> address ("10.199.2.1/24") of its port.
        """
        self._check_alive()
        ipv4 = ipv4 or {}
        unknown = set(ipv4) - {m.name for m in members}
        if unknown:
            raise TopologyError(f"ipv4 given for nodes that are not members: {sorted(unknown)}")
        k = next(self._bridge_seq)
        sw_name = f"br{k}"
        switch_ns = f"{self.prefix}-{sw_name}"
        self._add_namespace(switch_ns)
        switch = Node(self, sw_name, switch_ns)
        br_name = self._ifname(f"{self.tag}-br{k}")
        host.ip("link", "add", br_name, "type", "bridge", "stp_state", "0", netns=switch_ns)
        host.sysctl_in_netns(switch_ns, {f"net.ipv6.conf.{br_name}.disable_ipv6": "1"})
        if mtu is not None:
            host.ip("link", "set", "dev", br_name, "mtu", str(mtu), netns=switch_ns)
        host.ip("link", "set", "dev", br_name, "up", netns=switch_ns)
        bridge = Bridge(br_name, switch)
        for m in members:
            n = next(self._veth_seq)
            m_name = self._ifname(f"{self.tag}-v{n}a")
            s_name = self._ifname(f"{self.tag}-v{n}b")
            self._veth(m.netns, m_name, switch_ns, s_name)
            im, isw = Interface(m_name, m), Interface(s_name, switch)
            im.peer, isw.peer = isw, im
            m.interfaces[m_name], switch.interfaces[s_name] = im, isw
            host.ip("link", "set", "dev", s_name, "master", br_name, netns=switch_ns)
            self._setup_end(isw, mtu, None)
            self._setup_end(im, mtu, ipv4.get(m.name))
            bridge.ports[m.name] = im
        self.bridges[br_name] = bridge
        return bridge

    # -------------------------------------------------------------- inspection
    def namespaces(self) -> list[str]:
        """Names of the namespaces this topology created (and has not removed)."""
        return [ns for ns in self._namespaces if ns in set(host.netns_list())]

    def leftovers(self) -> list[str]:
        """Whatever of this topology still exists: namespaces, links in our namespace,
        DPDK runtime directories. Empty after a good teardown."""
        left = [f"netns {ns}" for ns in host.netns_list() if ns.startswith(self.prefix + "-")]
        left += [
            f"link {l}" for l in host.link_names() if l.startswith(self.tag + "-") and l in self._ifnames
        ]
        left += [f"dir {p}" for p in _dpdk_dirs(self.prefix)]
        return left

    # -------------------------------------------------------------- teardown
    def teardown(self) -> None:
        """Stop the apps, delete every namespace (and so every interface), remove DPDK
        runtime directories. Idempotent.

        Raises:
            TopologyError: something of this topology still exists afterwards.
        """
        with _registry_lock:
            if self._torn_down:
                return
            self._torn_down = True
        errors: list[str] = []
        for node in list(self.nodes.values()):
            try:
                node.stop_all()
            except Exception as e:  # noqa: BLE001
                errors.append(f"stopping apps of {node.name}: {e}")
        existing = set(_safe(host.netns_list, []))
        for ns in reversed(self._namespaces):
            if ns in existing:
                err = _remove_netns(ns)
                if err:
                    errors.append(err)
        for name in _safe(host.link_names, []):
            if name in self._ifnames:  # never expected: nothing is created in our namespace
                try:
                    host.ip("link", "del", "dev", name)
                except CommandError as e:
                    errors.append(str(e))
        for d in _dpdk_dirs(self.prefix):
            shutil.rmtree(d, ignore_errors=True)
        if self._own_log_dir and not self.keep_logs:
            self.log_dir.remove()
        with _registry_lock:
            _live.pop(id(self), None)
        left = _safe(self.leftovers, [])
        if left or errors:
            raise TopologyError(f"teardown of {self.prefix}: left {left}; errors {errors}")

    def __repr__(self) -> str:
        return f"Topology({self.prefix}, nodes={list(self.nodes)})"


def _safe(fn, default):
    try:
        return fn()
    except Exception:  # noqa: BLE001
        return default


def _dpdk_dirs(prefix: str) -> list[Path]:
    try:
        return [p for p in DPDK_RUNTIME_DIR.iterdir() if p.name.startswith(prefix + "-")]
    except OSError:
        return []


def _remove_netns(ns: str) -> str | None:
    """Kill what still runs inside @p ns (only our apps' strays can) and delete it."""
    for pid in host.netns_pids(ns):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        host.ip("netns", "del", ns)
    except CommandError as e:
        if "No such file" not in e.stderr:
            return str(e)
    return None


# ------------------------------------------------------------------ stale cleanup
def _run_is_live(pid: int) -> bool:
    """True if the harness process @p pid still runs (a reused pid is not a harness)."""
    if pid == os.getpid():
        return False  # names with our own tag not in _live come from an earlier, dead owner
    return host.pid_alive(pid) and "python" in host.pid_cmdline(pid)


def cleanup_stale(log=print) -> list[str]:
    """Remove namespaces, links and DPDK directories left by dead runs of this harness.

    Only names that start with ``imdts<pid>-`` where no harness with that pid runs any more
    are touched (and this process's own names only if no live topology owns them).

    Returns:
        What was removed, for the log.
    """
    with _registry_lock:
        owned = tuple(t.prefix + "-" for t in _live.values())
    removed: list[str] = []

    def stale(name: str) -> bool:
        pid = tag_pid(name)
        return pid is not None and not name.startswith(owned or ("\0",)) and not _run_is_live(pid)

    for ns in host.netns_list():
        if stale(ns):
            err = _remove_netns(ns)
            removed.append(f"netns {ns}" + (f" (failed: {err})" if err else ""))
    for name in host.link_names():
        if stale(name):
            host.ip("link", "del", "dev", name, check=False)
            removed.append(f"link {name}")
    try:
        dirs = list(DPDK_RUNTIME_DIR.iterdir())
    except OSError:
        dirs = []
    for d in dirs:
        if stale(d.name):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(f"dir {d}")
    for r in removed:
        log(f"dts: removed stale {r}")
    return removed


def all_leftovers(tag: str | None = None) -> list[str]:
    """Every namespace / link in our namespace / DPDK dir whose name starts with @p tag
    (default: this run's tag). Used to prove that teardown left nothing."""
    tag = tag or run_tag()
    out = [f"netns {ns}" for ns in host.netns_list() if ns.startswith(tag + "-")]
    out += [f"link {l}" for l in host.link_names() if l.startswith(tag + "-")]
    try:
        out += [f"dir {p}" for p in DPDK_RUNTIME_DIR.iterdir() if p.name.startswith(tag + "-")]
    except OSError:
        pass
    return out


def netns_supported() -> str | None:
    """None if namespaces and veth pairs can be made here, else the reason why not."""
    if not host.is_root():
        return "not root: network namespaces need CAP_SYS_ADMIN/CAP_NET_ADMIN"
    probe = f"{run_tag()}-probe"
    try:
        host.ip("netns", "add", probe)
        try:
            host.ip("link", "add", "probe0", "type", "veth", "peer", "name", "probe1", netns=probe)
            host.sysctl_in_netns(probe, {"net.ipv6.conf.all.disable_ipv6": "1"})
        finally:
            host.ip("netns", "del", probe, check=False)
    except CommandError as e:
        return f"ip netns / veth do not work here: {e}"
    return None


def main(argv: Iterable[str] | None = None) -> int:
    """``cd dts && python3 -m framework.topology --cleanup``: remove leftovers of dead runs."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cleanup", action="store_true", help="remove leftovers of dead runs")
    ap.add_argument("--list", action="store_true", help="list every name with our prefix")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.list:
        for ns in host.netns_list():
            if ns.startswith(PREFIX):
                print(f"netns {ns} (pid {tag_pid(ns)})")
    if args.cleanup:
        removed = cleanup_stale()
        print(f"removed {len(removed)} stale object(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
