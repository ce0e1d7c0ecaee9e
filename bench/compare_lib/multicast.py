# SPDX-License-Identifier: BSD-3-Clause
"""Reliable multicast on a Linux bridge: one sender, N receivers (``bench/compare --multicast``).

The testbed, built anew for each receiver count N: a Linux bridge in a namespace of its own
with multicast snooping off (every group frame is flooded to every port, as a hub would do it)
and 1 + N member namespaces, one veth port each, addressed in 10.199.70.0/24, which exists only
inside them. Everything is made by :class:`framework.topology.Topology` and removed with it:
at the end of each N, on an error, at exit and on SIGINT/SIGTERM.

Each transport is a *runner*: an object with ``name``, ``missing_reason()`` and
``run(bed, sender, receivers, size, msgs) -> dict``, which sends ``msgs`` messages of ``size``
bytes from node ``sender`` to every node of ``receivers`` (all members of ``bed``'s bridge),
bounded in time, and returns the figures of :data:`FIGURES` (raising
:class:`~compare_lib.runners.MeasureError` when it could not measure). :class:`NormRunner`
drives ``bench/peers/norm_perf``; an imago runner goes next to it in :func:`runners_for`.

For every (N, size) each runner's run() is called once (NormRunner tries its rate controls
inside it, see there); the table has a row per runner, N and size:
goodput per receiver (payload bytes each receiver got, over the time until every receiver
had acknowledged all of it), in MiB/s and messages/s, and the sender's CPU time per message
(user + system of the sending process, the kernel's work done on its behalf included).
"""

from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from framework import host
from framework.apps import af_packet_vdev, binary_missing_reason, build_dir, result_object
from framework.exceptions import CommandError, DtsError
from framework.node import AppProcess, LogDir, Node
from framework.topology import Bridge, Interface, Topology, install_cleanup_handlers

from compare_lib.report import fmt_rate, fmt_size
from compare_lib.runners import MeasureError

DEFAULT_RECEIVERS = (1, 3, 8)
DEFAULT_SIZES = (64, 16384)
#: Time cap of one run of a transport (its sender's --duration).
DEFAULT_CAP_S = 30.0
#: Beyond the cap: start-up, receivers lingering for the last acknowledgement, RESULT lines.
SLACK_S = 20.0
READY_TIMEOUT_S = 15.0
SUBNET = "10.199.70"
GROUP = "239.255.70.1"
#: Each run of a transport uses a fresh UDP port: nothing of a previous run can reach it.
FIRST_PORT = 17000

#: What a runner's run() returns (None where the transport cannot say).
FIGURES = {
    "mib_per_s": "goodput per receiver, MiB/s: payload bytes over the time until all receivers have all",
    "msgs_per_s": "the same in messages per second",
    "sender_cpu_ns_per_msg": "user + system CPU time of the sending process per message sent, ns",
    "seconds": "first message sent to the last one acknowledged by every receiver",
    "delivered_min": "messages the poorest receiver got intact (== msgs when nothing was lost)",
    "lost": "messages missing at receivers, summed over them",
    "rx_drops": "UDP datagrams the receivers' kernels dropped (socket buffer full), summed; each needed a repair",
    "repair_per_data": "repair frames per data frame first sent (None: the transport does not say)",
    "settings": "the transport's configuration in a few words",
    "notes": "list of remarks (attempts, integrity problems)",
    "logs": "list of log files",
}


def default_msgs(size: int) -> int:
    """Messages per run: a million small ones, else about 320 MiB (20,000 of 16 KiB)."""
    return max(1000, min(1_000_000, (20_000 * 16384) // size))


# ------------------------------------------------------------------ the testbed
@dataclass
class McastBed:
    """One bridge, its sender and receiver nodes (see the module's text)."""

    topo: Topology
    bridge: Bridge
    sender: Node
    receivers: list[Node]
    mtu: int
    _port: int = FIRST_PORT

    def iface(self, node: Node) -> Interface:
        """@p node's port on the bridge (its end of the veth pair, inside its namespace)."""
        return self.bridge.port(node)

    def next_port(self) -> int:
        self._port += 1
        return self._port

    def udp_rcvbuf_errors(self, nodes: list[Node] | None = None) -> int:
        """UDP datagrams the kernels of @p nodes (default: the receivers) dropped for a full
        socket buffer so far (``Udp: RcvbufErrors`` of /proc/net/snmp; namespaced)."""
        total = 0
        for n in nodes if nodes is not None else self.receivers:
            lines = [l.split() for l in n.exec(["cat", "/proc/net/snmp"]).stdout.splitlines() if l.startswith("Udp:")]
            if len(lines) >= 2 and "RcvbufErrors" in lines[0]:
                total += int(lines[1][lines[0].index("RcvbufErrors")])
        return total


def drop_towards(bed: "McastBed", node: Node, loss_pct: float) -> None:
    """Drop @p loss_pct % of the frames the bridge sends @p node, at random (nftables on the
    egress of the bridge's end of its port: seen by every transport, af_packet included)."""
    sw = bed.iface(node).peer
    chain = "to_" + sw.name.replace("-", "_")
    nft = ["ip", "netns", "exec", sw.netns, "nft"]
    host.run_cmd(nft + ["add", "table", "netdev", "imago_mc"])
    host.run_cmd(nft + ["add", "chain", "netdev", "imago_mc", chain,
                        f'{{ type filter hook egress device "{sw.name}" priority 0; }}'])
    host.run_cmd(nft + ["add", "rule", "netdev", "imago_mc", chain, "numgen", "random", "mod", "1000", "<",
                        str(round(loss_pct * 10)), "counter", "drop"])


def build_bed(topo: Topology, n_receivers: int, mtu: int) -> McastBed:
    """A bridge with snooping off, one sender and @p n_receivers receivers on it."""
    sender = topo.add_node("msnd")
    receivers = [topo.add_node(f"mrcv{i}") for i in range(1, n_receivers + 1)]
    members = [sender] + receivers
    ipv4 = {m.name: f"{SUBNET}.{i}/24" for i, m in enumerate(members, 1)}
    br = topo.add_bridge(members, mtu=mtu, ipv4=ipv4)
    ns = br.switch.netns
    host.ip("link", "set", "dev", br.name, "type", "bridge", "mcast_snooping", "0", netns=ns)
    info = json.loads(host.ip("-d", "-j", "link", "show", "dev", br.name, netns=ns).stdout)[0]
    snooping = info.get("linkinfo", {}).get("info_data", {}).get("mcast_snooping")
    if snooping != 0:
        raise MeasureError(f"bridge {br.name}: mcast_snooping is {snooping!r} after setting it to 0")
    return McastBed(topo, br, sender, receivers, mtu)


# ------------------------------------------------------------------ runners
class Runner(Protocol):
    name: str

    def missing_reason(self) -> str | None: ...

    def run(self, bed: McastBed, sender: Node, receivers: list[Node], size: int, msgs: int) -> dict: ...


def _stop(procs: list[AppProcess | None]) -> None:
    for p in procs:
        if p is not None and p.running:
            p.kill()


def _result(proc: AppProcess, timeout: float) -> dict:
    """Wait (bounded) for @p proc to exit 0 and return its RESULT object."""
    rc = proc.wait(timeout)
    if rc != 0:
        raise MeasureError(f"{proc.name} exited with {rc}; log {proc.log_path}")
    return result_object(proc.lines("stdout"))


@dataclass
class NormRunner:
    """NORM (libnorm) through bench/peers/norm_perf: one NORM stream, the receivers as acking
    nodes, ACK-based flow control by watermarks (see norm_perf --help).

    Rate control: NORM either paces at a fixed rate or runs its congestion control, and which
    is faster without loss depends on the receivers' count and on what else the cores do. So
    each measurement runs once per entry of ``rates`` ("cc" or a fixed rate in Mbit/s) and
    keeps the fastest run in which every receiver got every message and no receiver's kernel
    dropped a datagram (no repair was needed); if every run needed repairs, the fastest
    complete one, with a note. Every attempt is listed in the notes.
    """

    cap_s: float = DEFAULT_CAP_S
    rates: tuple[str, ...] = ("cc", "2000", "1000", "500")
    log: Callable[[str], None] = print
    name: str = "norm"
    binary: Path = field(default_factory=lambda: build_dir() / "bench" / "peers" / "norm_perf")

    def missing_reason(self) -> str | None:
        r = binary_missing_reason(self.binary)
        return f"{r} (norm_perf is built only when libnorm-dev is installed)" if r else None

    def segment(self, mtu: int) -> int:
        """NORM's segment for @p mtu: what IPv4, UDP and NORM's largest data header leave."""
        return min(8900, mtu - 100)

    def run(self, bed: McastBed, sender: Node, receivers: list[Node], size: int, msgs: int) -> dict:
        attempts: list[tuple[str, dict | None, str]] = []
        for rate in self.rates:
            try:
                attempts.append((rate, self._once(bed, sender, receivers, size, msgs, rate), ""))
            except (MeasureError, DtsError) as e:
                attempts.append((rate, None, str(e).splitlines()[0][:300]))
            self.log(f"  norm {len(receivers)} rx {fmt_size(size)}: {_attempt_words(*attempts[-1])}")
        done = [(r, f) for r, f, _ in attempts if f is not None and f["complete"]]
        clean = [(r, f) for r, f in done if f["rx_drops"] == 0]
        pool = clean or done
        if not pool:
            raise MeasureError("; ".join(f"{_rate_words(r)}: {why or 'incomplete'}" for r, _, why in attempts))
        rate, best = max(pool, key=lambda rf: rf[1]["mib_per_s"])
        notes = ["tried " + "; ".join(_attempt_words(r, f, why) for r, f, why in attempts)]
        if not clean:
            notes.append("every complete run needed repairs (receivers' kernels dropped datagrams)")
        notes += best["notes"]
        return {**best, "settings": f"{_rate_words(rate)}, {best['settings']}", "notes": notes}

    def _once(self, bed: McastBed, sender: Node, receivers: list[Node], size: int, msgs: int, rate: str) -> dict:
        group = f"{GROUP}:{bed.next_port()}"
        seg = self.segment(bed.mtu)
        common = ["--group", group, "--msgs", str(msgs), "--size", str(size), "--segment", str(seg)]
        rx_procs: list[AppProcess | None] = []
        tx = None
        tag = f"norm-n{len(receivers)}-s{size}-{rate}"
        try:
            for i, node in enumerate(receivers):
                argv = [str(self.binary), "--role", "receiver", "--node-id", str(2 + i),
                        "--iface", bed.iface(node).name, "--duration", _num(self.cap_s + SLACK_S / 2)] + common
                rx_procs.append(node.start(argv, name=f"{tag}-rx"))
            for p in rx_procs:
                p.wait_for_line("READY", READY_TIMEOUT_S, stream="stdout")
            drops0 = bed.udp_rcvbuf_errors(receivers)
            argv = [str(self.binary), "--role", "sender", "--receivers", str(len(receivers)),
                    "--first-receiver-id", "2", "--iface", bed.iface(sender).name, "--duration", _num(self.cap_s),
                    "--rate", "0" if rate == "cc" else rate] + common
            tx = sender.start(argv, name=f"{tag}-tx")
            t = _result(tx, self.cap_s + SLACK_S)
            rs = [_result(p, SLACK_S) for p in rx_procs]
            drops = bed.udp_rcvbuf_errors(receivers) - drops0
        finally:
            _stop([tx] + rx_procs)
        logs = [str(p.log_path) for p in [tx] + rx_procs if p is not None]
        notes = []
        bad = {k: sum(r.get(k, 0) for r in rs) for k in ("corrupted", "duplicated", "reordered", "stream_breaks")}
        if any(bad.values()):
            notes.append("integrity: " + ", ".join(f"{k} {v}" for k, v in bad.items() if v))
        delivered_min = min(r["msgs_delivered"] for r in rs)
        complete = bool(t.get("acked")) and delivered_min == msgs and not any(bad.values())
        d = t.get("detail", {})
        return {
            "complete": complete,
            "mib_per_s": t.get("mib_per_s") if complete else None,
            "msgs_per_s": t.get("msgs_per_s") if complete else None,
            "sender_cpu_ns_per_msg": t.get("sender_cpu_ns_per_msg"),
            "seconds": t.get("seconds"),
            "delivered_min": delivered_min,
            "lost": sum(r.get("lost", 0) for r in rs),
            "rx_drops": drops,
            "settings": f"stream, segment {d.get('segment')} B, block {d.get('block')}, buffer "
                        f"{d.get('buffer', 0) // (1 << 20)} MiB, window {d.get('window_bytes', 0) / (1 << 20):.1f} MiB",
            "final_tx_rate_mbps": d.get("final_tx_rate_mbps"),
            "grtt_ms": d.get("grtt_ms"),
            "timed_out": bool(t.get("timed_out")),
            "notes": notes,
            "logs": logs,
        }


def _rate_words(rate: str) -> str:
    return "congestion control" if rate == "cc" else f"fixed {rate} Mbit/s"


def _attempt_words(rate: str, f: dict | None, why: str) -> str:
    if f is None:
        return f"{_rate_words(rate)}: failed ({why})"
    if not f["complete"]:
        return f"{_rate_words(rate)}: incomplete ({f['delivered_min']} delivered at worst)"
    return f"{_rate_words(rate)}: {f['mib_per_s']:.1f} MiB/s, {f['rx_drops']} drops"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass
class ImagoRunner:
    """imago through apps/examples/imago-group (imago.h only), one process per node, each node
    embedded on net_af_packet over its bridge port and run to completion (one busy thread per
    process: the application's, which polls its node too). The sender waits for every
    receiver to join, sends, and ends once every receiver acknowledged everything (its
    stream's pending units 0); goodput is its payload bytes over that time.

    ``unicast``: the same with ``--no-multicast``: every group frame goes to each receiver by
    unicast, as N unicast streams would (the contrast IBRMP draws).
    ``label``: a name of its own for a variant run with ``extra`` options (imago-noparity:
    ``--group-parity 0``, the contrast for parity repair under loss).
    """

    cap_s: float = DEFAULT_CAP_S
    unicast: bool = False
    extra: tuple[str, ...] = ()
    #: Each process naps this long when a pass moved nothing (imago-group --idle-us): nine
    #: busy-polling processes on two cores otherwise leave none to the kernel, whose softirqs
    #: carry every veth frame (a round trip then takes a scheduler slice, about 8 ms).
    idle_us: int = 20
    log: Callable[[str], None] = print
    binary: Path = field(default_factory=lambda: build_dir() / "apps" / "examples" / "imago-group")
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or ("imago-unicast" if self.unicast else "imago")

    def missing_reason(self) -> str | None:
        return binary_missing_reason(self.binary)

    def _argv(self, bed: McastBed, node: Node, node_id: int, peers: list[tuple[int, Node]], role: list[str],
              size: int, msgs: int) -> list[str]:
        iface = bed.iface(node).name
        eal = ["--lcores", f"0@(0-{(os.cpu_count() or 1) - 1})", "--no-huge", "-m", "1024", "--no-shconf", "--no-pci", "--no-telemetry",
               "--file-prefix", f"immc{node_id}", "--vdev", af_packet_vdev(iface, bed.mtu)]
        node_opts = ["--node-id", str(node_id), "--mtu", str(bed.mtu), "--run-to-completion", *self.extra,
                     *[a for pid, p in peers for a in ("--peer", f"{pid}@{bed.iface(p).mac}")]]
        if self.unicast:
            node_opts.append("--no-multicast")
        return [str(self.binary), *role, "--group", "7", "--count", str(msgs), "--size", str(size), "--timeout",
                _num(self.cap_s), "--idle-us", str(self.idle_us), "--", *eal, "--", *node_opts]

    def run(self, bed: McastBed, sender: Node, receivers: list[Node], size: int, msgs: int) -> dict:
        tag = f"{self.name}-n{len(receivers)}-s{size}"
        rx_procs: list[AppProcess | None] = []
        tx = None
        try:
            for i, node in enumerate(receivers):
                argv = self._argv(bed, node, 2 + i, [(1, sender)], ["sub"], size, msgs)
                rx_procs.append(node.start(argv, name=f"{tag}-rx"))
            for p in rx_procs:
                p.wait_for_line("READY", READY_TIMEOUT_S, stream="stdout")
            peers = [(2 + i, n) for i, n in enumerate(receivers)]
            argv = self._argv(bed, sender, 1, peers, ["pub", "--members", str(len(receivers))], size, msgs)
            tx = sender.start(argv, name=f"{tag}-tx")
            t = _result(tx, self.cap_s + SLACK_S)
            rs = [_result(p, SLACK_S) for p in rx_procs]
        finally:
            _stop([tx] + rx_procs)
        logs = [str(p.log_path) for p in [tx] + rx_procs if p is not None]
        bad = {k: sum(r.get(k, 0) for r in rs) for k in ("corrupted", "duplicated", "reordered")}
        notes = ["integrity: " + ", ".join(f"{k} {v}" for k, v in bad.items() if v)] if any(bad.values()) else []
        delivered_min = min(r["msgs_delivered"] for r in rs)
        complete = t.get("pending") == 0 and delivered_min == msgs and not any(bad.values())
        secs = t.get("duration_s") or 0.0
        first = (t.get("data_frames") or 0) + (t.get("unicast_copies") or 0)
        return {
            "complete": complete,
            "mib_per_s": t["bytes_sent"] / (1 << 20) / secs if complete and secs else None,
            "msgs_per_s": msgs / secs if complete and secs else None,
            "sender_cpu_ns_per_msg": t.get("process_cpu_ns_per_msg"),
            "seconds": secs,
            "delivered_min": delivered_min,
            "lost": sum(r.get("lost", 0) for r in rs),
            "expired": t.get("expired_ids") or [],
            "rx_drops": 0,
            "repair_per_data": (t.get("repair_frames") or 0) / first if first else None,
            "settings": f"{'unicast copies' if self.unicast else 'multicast'}, frames first sent {first}, "
                        f"repairs {t.get('repair_frames')} (parity {t.get('parity_frames')}), run to completion, "
                        f"idle nap {self.idle_us} us{', ' + ' '.join(self.extra) if self.extra else ''}",
            "notes": notes + ["sender CPU includes busy polling: one thread always runs"],
            "logs": logs,
        }


def runners_for(only: list[str] | None, cap_s: float, rates: tuple[str, ...], log, lossy: bool = False) -> list[Runner]:
    """The runners to measure: all known ones, or those whose name starts with an @p only entry.
    @p lossy (--loss): imago without parity repair too, for contrast."""
    known: list[Runner] = [ImagoRunner(cap_s=cap_s, log=log), ImagoRunner(cap_s=cap_s, unicast=True, log=log),
                           NormRunner(cap_s=cap_s, rates=rates, log=log)]
    if lossy:
        known.insert(1, ImagoRunner(cap_s=cap_s, log=log, extra=("--group-parity", "0"), label="imago-noparity"))
    return [r for r in known if not only or any(r.name.startswith(o) for o in only)]


# ------------------------------------------------------------------ the run
CSV_FIELDS = ["transport", "receivers", "size_bytes", "msgs", "status", "mib_per_s", "msgs_per_s",
              "sender_cpu_ns_per_msg", "seconds", "delivered_min", "lost", "rx_drops", "repair_per_data", "settings",
              "reason",
              "notes", "logs"]


def markdown(rows: list[dict], title: str, meta_lines: list[str]) -> str:
    out = [f"## {title}", ""] + [f"{l}  " for l in meta_lines] + [""]
    out.append("| transport | receivers | size | goodput per receiver | msgs/s per receiver | sender CPU per msg "
               "| until all acked | rx drops | repairs per data frame | settings |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        if r["status"] != "ok":
            out.append(f"| {r['transport']} | {r['receivers']} | {fmt_size(r['size_bytes'])} | failed: "
                       f"{r['reason'][:120]} | | | | | | |")
            continue
        out.append(f"| {r['transport']} | {r['receivers']} | {fmt_size(r['size_bytes'])} | {r['mib_per_s']:.1f} MiB/s "
                   f"| {fmt_rate(r['msgs_per_s'])} | {r['sender_cpu_ns_per_msg']:.0f} ns | {r['seconds']:.2f} s "
                   f"| {r['rx_drops']} | {_ratio(r.get('repair_per_data'))} | {r['settings']} |")
    return "\n".join(out)


def _shortfall(f: dict, msgs: int) -> str:
    """What an incomplete run lacked: the least any receiver delivered, and its notes."""
    return "; ".join([f"{f['delivered_min']} of {msgs} delivered at the slowest receiver",
                      *[n for n in f.get("notes", []) if not n.startswith("sender CPU")],
                      *([f"expired {f['expired']}"] if f.get("expired") else [])])


def _ratio(x) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def main(receivers: list[int], sizes: list[int], msgs_scale: float, cap_s: float, mtu: int, out: Path,
         only: list[str] | None, rates: tuple[str, ...], meta: dict, log=print, loss_pct: float = 0.0) -> int:
    """Measure every runner for each receiver count and size; write results.csv, table.md,
    meta.json and logs/ to @p out; print the table. @return the exit status (0: something
    measured, 1: nothing, 2: no runner can run)."""
    out.mkdir(parents=True, exist_ok=True)
    logs = LogDir(out / "logs")
    runners = runners_for(only, cap_s, rates, log, lossy=loss_pct > 0)
    if not runners:
        log(f"--only {only} matches no multicast runner")
        return 2
    usable = []
    for r in runners:
        why = r.missing_reason()
        if why:
            log(f"warning: {r.name}: {why}; skipped")
        else:
            usable.append(r)
    if not usable:
        return 2
    install_cleanup_handlers()
    rows: list[dict] = []
    t0 = time.monotonic()
    try:
        for n in receivers:
            with Topology(log_dir=logs) as topo:
                bed = build_bed(topo, n, mtu)
                for node in bed.receivers if loss_pct > 0 else []:
                    drop_towards(bed, node, loss_pct)
                log(f"bridge {bed.bridge.name} (netns {bed.bridge.switch.netns}), snooping off, MTU {mtu}: "
                    f"sender {bed.sender.netns}, {n} receiver(s)")
                for size in sizes:
                    msgs = max(1, int(default_msgs(size) * msgs_scale))
                    for r in usable:
                        t1 = time.monotonic()
                        row = {"transport": r.name, "receivers": n, "size_bytes": size, "msgs": msgs}
                        try:
                            f = r.run(bed, bed.sender, bed.receivers, size, msgs)
                            if not f["complete"]:  # a figure only for a run every receiver finished
                                raise MeasureError(f"incomplete: {_shortfall(f, msgs)}; logs {f['logs'][0]}")
                            row.update(f, status="ok", reason="")
                            log(f"{r.name:6} {n} rx {fmt_size(size):>7}: {f['mib_per_s']:.1f} MiB/s, "
                                f"{fmt_rate(f['msgs_per_s'])} msg/s, {f['sender_cpu_ns_per_msg']:.0f} ns/msg "
                                f"({time.monotonic() - t1:.0f} s; {f['settings']})")
                        except (MeasureError, DtsError, CommandError) as e:
                            row.update(status="failed", reason=str(e).splitlines()[0][:400])
                            log(f"{r.name:6} {n} rx {fmt_size(size):>7}: FAILED: {row['reason']}")
                        rows.append(row)
    finally:
        with open(out / "results.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({k: "; ".join(v) if isinstance(v, list) else ("" if v is None else v)
                            for k, v in ((k, r.get(k)) for k in CSV_FIELDS)})
    wall = time.monotonic() - t0
    meta = {**meta, "wall_s": round(wall, 1), "loss_pct": loss_pct, "receivers": receivers, "sizes": sizes, "mtu": mtu,
            "cap_s": cap_s, "msgs_scale": msgs_scale, "norm_rates": list(rates)}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    title = f"Reliable multicast, one sender to N receivers on a Linux bridge — {meta.get('started_utc', '')[:10]}"
    lines = [
        f"Host `{meta.get('host')}`: {meta.get('cpus')} × {meta.get('cpu')}, Linux {meta.get('kernel')}, commit "
        f"`{meta.get('commit')}`; {wall / 60:.1f} min. Processes not pinned; every sender and receiver shares the "
        "machine's cores (other work too).",
        f"A bridge in a namespace of its own, multicast snooping off, MTU {mtu}; one veth port per member namespace. "
        "Goodput per receiver = payload bytes / time from the first message sent until every receiver "
        "acknowledged the last one; sender CPU = user + system time of the sending process per message.",
        "rx drops: datagrams the receivers' kernels dropped (socket buffer full), each repaired by the transport.",
        f"Loss injected: {loss_pct:g} % of the frames towards each receiver, independently (nftables on the "
        "bridge's egress port)." if loss_pct else "No loss injected.",
    ]
    table = markdown(rows, title, lines)
    (out / "table.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    ok = [r for r in rows if r["status"] == "ok"]
    print(f"\n{len(ok)} measured, {len(rows) - len(ok)} failed in {wall:.0f} s. Results in {out}/")
    return 0 if ok else 1
