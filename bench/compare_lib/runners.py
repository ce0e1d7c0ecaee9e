# SPDX-License-Identifier: BSD-3-Clause
"""How bench/compare measures one case, through the DTS framework's typed wrappers.

The testbed is two network namespaces (nodes ``tx`` and ``rx``) joined by one veth pair with
IPv4 addresses; every veth measurement uses that same pair:

* imago over net_af_packet on the veth, and over net_memif (the rx process is the memif
  server): rx process first on lcore 1, wait for READY, then tx on lcore 0;
* imago ``--pair`` (net_ring, one process) in the host namespace, as a newcomer types it;
* tcp_perf / zmq_perf: the server in ``rx``, the client in ``tx``, not pinned.

Every run is bounded: the sender stops after the case's time cap (``--duration``), every wait
has a time limit, and a process still running at the end is killed. A failed measurement
raises :class:`MeasureError` with the reason; the caller records it and goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from framework.apps import ImagoPerf, PerfParams, Result, Role, af_packet_vdev, perf_binary
from framework.exceptions import DtsError
from framework.imago_apps import ImagodRun, hugepages_missing_reason
from framework.node import LogDir
from framework.peers import (
    Peer, PeerKind, PeerMode, PeerParams, PeerRole, tcp_endpoint, zmq_ipc_endpoint, zmq_tcp_endpoint,
)
from framework.topology import Topology

from compare_lib.plan import RTT, Case

TX_IP, RX_IP = "10.199.60.1/24", "10.199.60.2/24"
READY_TIMEOUT_S = 30.0
#: A memif server must be listening before its client connects.
MEMIF_SETTLE_S = 0.5
#: Time allowed beyond the cap for start-up, draining and the RESULT line.
SLACK_S = 30.0
#: imago receivers stop after this much silence once traffic began.
RX_IDLE_MS = 500
#: The af_xdp rows' veth pair: XDP on a veth (and net_af_xdp's frames in one page) take at most this MTU.
XDP_MTU = 3000
XDP_TX_IP, XDP_RX_IP = "10.199.61.1/24", "10.199.61.2/24"


class MeasureError(Exception):
    """One measurement failed; the message is the reason (one line)."""


@dataclass
class Measurement:
    """What one case measured (the fields of a CSV row that come from the programs)."""

    msgs_sent: int = 0
    msgs_delivered: int = 0
    duration_s: float = 0.0
    msgs_per_s: float = 0.0
    gbps: float | None = None
    rtt_us: dict = field(default_factory=dict)
    not_delivered: int = 0
    retransmits: int | None = None
    frames_sent: int | None = None
    time_capped: bool = False
    notes: list[str] = field(default_factory=list)
    command: str = ""
    logs: list[str] = field(default_factory=list)


def _one_line(e: BaseException, limit: int = 400) -> str:
    """An exception as one line: its first line and, if any, the last line of the app's tail."""
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    if not lines:
        return type(e).__name__
    text = lines[0]
    if len(lines) > 1:
        text += " ... " + lines[-1]
    return text[:limit]


class Testbed:
    """The namespaces, the veth pair and the logs of one bench/compare run."""

    def __init__(self, topo: Topology, logs: LogDir, veth_mtu: int = 1500):
        self.topo = topo
        self.logs = logs
        self.veth_mtu = veth_mtu  # every veth row: imago's frames, TCP's and ZeroMQ's segments
        self.tx_if, self.rx_if = topo.add_veth(topo.add_node("tx"), topo.add_node("rx"), mtu=veth_mtu,
                                               a_ipv4=TX_IP, b_ipv4=RX_IP)
        self.xtx_if, self.xrx_if = topo.add_veth(topo.add_node("xtx"), topo.add_node("xrx"), mtu=XDP_MTU,
                                                 a_ipv4=XDP_TX_IP, b_ipv4=XDP_RX_IP)
        self._seq = 0
        self.tmp = Path("/tmp")

    def next_id(self) -> int:
        self._seq += 1
        return self._seq

    # -------------------------------------------------------------- dispatch
    def measure(self, case: Case) -> Measurement:
        s = case.series
        if s.key == "imago-api-imagod":
            return self._imago_api_imagod(case)
        if s.family in ("imago", "raw"):
            if s.link == "ring":
                extra = {"imago-api-pair": ["--via", "api"], "imago-api-rtc": ["--via", "api", "--run-to-completion"],
                         "imago-pair-loss1": ["--loss", "0.01"], "imago-pair-loss10": ["--loss", "0.1"]}
                return self._imago_pair(case, extra.get(s.key, []))
            return self._imago_procs(case)
        return self._peer(case)

    # -------------------------------------------------------------- two processes, one run
    def _receiver_then_sender(self, m: Measurement, case: Case, start_rx, start_tx, sock: Path | None,
                              settle_s: float = 0.0):
        """Start the receiving side (server) and wait for its READY, then the sender (client);
        @return the sender's and the receiver's results. Both are stopped and @p sock removed
        whatever happens; a failure is a MeasureError."""
        rx = tx = None
        try:
            rx = start_rx()
            m.logs.append(str(rx.log_path))
            rx.wait_ready(READY_TIMEOUT_S)
            if settle_s:
                time.sleep(settle_s)
            tx = start_tx()
            m.logs.append(str(tx.log_path))
            m.command = " ".join(tx.proc.argv)
            return tx.result(timeout=case.cap_s + SLACK_S), rx.result(timeout=SLACK_S)
        except DtsError as e:
            raise MeasureError(_one_line(e)) from None
        finally:
            for run in (tx, rx):
                if run is not None and run.proc.running:
                    run.stop()
            if sock is not None and sock.exists():
                sock.unlink()

    # -------------------------------------------------------------- imago, two processes
    def _imago_procs(self, case: Case) -> Measurement:
        s, n = case.series, self.next_id()
        sock = None
        mtu = None
        tx_if, rx_if = self.tx_if, self.rx_if
        if s.link == "veth":
            # Raw modes send one message a frame (at most 1 KiB here): standard ring frames.
            mtu = self.veth_mtu if self.veth_mtu != 1500 and s.family == "imago" else None
            tx_vdev = af_packet_vdev(self.tx_if.name, mtu or 1500)
            rx_vdev = af_packet_vdev(self.rx_if.name, mtu or 1500)
            tx_mac, rx_mac = self.tx_if.mac, self.rx_if.mac
        elif s.link == "veth-xdp":
            tx_if, rx_if = self.xtx_if, self.xrx_if
            mtu = XDP_MTU if s.family == "imago" else None
            tx_vdev, rx_vdev = f"net_af_xdp0,iface={tx_if.name}", f"net_af_xdp0,iface={rx_if.name}"
            tx_mac, rx_mac = tx_if.mac, rx_if.mac
        else:
            sock = self.tmp / f"imago-compare-{os.getpid()}-{n}.sock"
            tx_vdev = f"net_memif0,role=client,socket={sock},socket-abstract=no"
            rx_vdev = f"net_memif0,role=server,socket={sock},socket-abstract=no"
            tx_mac = rx_mac = None
        name = f"c{n}-{s.key}-{s.pattern}-{case.size}"
        params = PerfParams(role=Role.RX, msgs=case.msgs, size=case.size, mode=s.pattern,
                            duration_s=case.cap_s + SLACK_S / 2, idle_timeout_ms=RX_IDLE_MS,
                            peer_mac=tx_mac, mtu=mtu)
        tx_params = replace(params, role=Role.TX, duration_s=case.cap_s, peer_mac=rx_mac,
                            idle_timeout_ms=None)
        m = Measurement()
        t, r = self._receiver_then_sender(
            m, case, lambda: ImagoPerf(rx_if.node).start_raw_vdev(rx_vdev, params, lcore=1, name=f"{name}-rx"),
            lambda: ImagoPerf(tx_if.node).start_raw_vdev(tx_vdev, tx_params, lcore=0, name=f"{name}-tx"),
            sock, MEMIF_SETTLE_S if sock is not None else 0.0)
        return _from_imago(case, t, r, m)

    # -------------------------------------------------------------- imago --pair
    def _imago_pair(self, case: Case, extra: list[str]) -> Measurement:
        s, n = case.series, self.next_id()
        binary = perf_binary()
        argv = [str(binary), "--pair", "--mode", s.pattern, "--msgs", str(case.msgs), "--size",
                str(case.size), "--duration", _num(case.cap_s), "--quiet"] + extra
        log = self.logs.new_log(f"c{n}-{s.key}-{s.pattern}-{case.size}-pair")
        m = Measurement(command=" ".join(argv), logs=[str(log)])
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"# argv: {' '.join(argv)}\n")
            f.flush()
            try:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=f, text=True, start_new_session=True)
            except OSError as e:
                raise MeasureError(f"cannot start {binary}: {e}") from None
            try:
                out, _ = p.communicate(timeout=case.cap_s + SLACK_S)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                out, _ = p.communicate()
                f.write(out or "")
                raise MeasureError(f"--pair still running after {case.cap_s + SLACK_S:.0f} s, killed; log {log}")
            finally:
                # imago-perf's embedded EAL default names its runtime directory after its pid.
                shutil.rmtree(f"/var/run/dpdk/imago-{p.pid}", ignore_errors=True)
            f.write(out)
        lines = out.splitlines()
        if p.returncode != 0:
            with open(log, encoding="utf-8", errors="replace") as f:
                tail = [l.strip() for l in f.read().splitlines() if l.strip()]
            raise MeasureError(f"--pair exited with {p.returncode}: {tail[-1] if tail else ''}; log {log}")
        try:
            res = Result.from_stdout(lines)
        except DtsError as e:
            raise MeasureError(f"{_one_line(e)}; log {log}") from None
        return _from_imago(case, res, res, m)

    # -------------------------------------------------------------- imago.h, a secondary of imagod
    def _imago_api_imagod(self, case: Case) -> Measurement:
        """imagod --pair (hugepages) in node tx; imago-perf --attach runs both ends through it."""
        reason = hugepages_missing_reason()
        if reason:
            raise MeasureError(f"imagod needs hugepages: {reason}")
        s, n = case.series, self.next_id()
        node = self.tx_if.node
        prefix = f"{self.topo.prefix}-cmp{n}"
        name = f"c{n}-{s.key}-{s.pattern}-{case.size}"
        d = run = None
        m = Measurement()
        try:
            d = ImagodRun.start(node, prefix, stats_period_s=0, name=f"{name}-imagod")
            m.logs.append(str(d.proc.log_path))
            d.proc.wait_for_line("serving 2 node(s)", READY_TIMEOUT_S, stream="stdout")
            args = ["--attach", prefix, "--mode", s.pattern, "--msgs", str(case.msgs), "--size", str(case.size),
                    "--duration", _num(case.cap_s), "--quiet"]
            run = ImagoPerf(node).start_args(args, name=name)
            m.logs.append(str(run.log_path))
            m.command = " ".join(run.proc.argv)
            res = run.result(timeout=case.cap_s + SLACK_S)
        except DtsError as e:
            raise MeasureError(_one_line(e)) from None
        finally:
            if run is not None and run.proc.running:
                run.stop()
            if d is not None:
                d.cleanup()
        return _from_imago(case, res, res, m)

    # -------------------------------------------------------------- TCP and ZeroMQ
    def _peer(self, case: Case) -> Measurement:
        s, n = case.series, self.next_id()
        kind = PeerKind.TCP if s.family == "tcp" else PeerKind.ZMQ
        reason = Peer.missing_reason(kind)
        if reason:
            raise MeasureError(reason)
        port = 20000 + n
        sock = None
        if s.family == "tcp":
            endpoint = tcp_endpoint(self.rx_if.ip, port)
        elif s.link == "ipc":
            sock = self.tmp / f"imago-compare-{os.getpid()}-z{n}.sock"
            endpoint = zmq_ipc_endpoint(sock)
        else:
            endpoint = zmq_tcp_endpoint(self.rx_if.ip, port)
        mode = PeerMode.PINGPONG if s.test == RTT else PeerMode.STREAM
        params = PeerParams(role=PeerRole.SERVER, endpoint=endpoint, mode=mode, msgs=case.msgs,
                            size=case.size, duration_s=case.cap_s, busy_poll=(s.wait == "spin"))
        name = f"c{n}-{s.key}-{case.size}"
        m = Measurement()
        c, r = self._receiver_then_sender(
            m, case, lambda: Peer(self.rx_if.node, kind).start(params, name=f"{name}-server"),
            lambda: Peer(self.tx_if.node, kind).start(params.client(), name=f"{name}-client"), sock)
        bad = {k: getattr(r, k) + getattr(c, k) for k in ("corrupted", "duplicated", "reordered")}
        if any(bad.values()):
            m.notes.append("integrity: " + ", ".join(f"{k} {v}" for k, v in bad.items() if v))
        m.time_capped = bool(c.timed_out)
        if s.test == RTT:
            if c.rtt_us is None or c.msgs_delivered == 0:
                raise MeasureError(f"no round trip completed; log {m.logs[-1]}")
        elif r.msgs_delivered == 0:
            raise MeasureError(f"server received nothing; log {m.logs[0]}")
        _fill(m, s.test == RTT, c, r)
        return m


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _fill(m: Measurement, rtt: bool, sender, receiver) -> None:
    """The figures of @p m from the sender's and the receiver's results: round trips are the
    sender's (the pinger times them); one-way throughput is what the receiver counted."""
    src = sender if rtt else receiver
    m.msgs_sent, m.msgs_delivered = sender.msgs_sent, src.msgs_delivered
    m.duration_s, m.msgs_per_s = src.duration_s, src.msgs_per_s
    if rtt:
        m.rtt_us = dict(sender.raw["rtt_us"])
    else:
        m.gbps = receiver.gbps
    m.not_delivered = max(0, sender.msgs_sent - src.msgs_delivered)


def _from_imago(case: Case, t: Result, r: Result, m: Measurement) -> Measurement:
    """Fill @p m from the sender's (@p t) and receiver's (@p r) RESULT (the same for --pair)."""
    s = case.series
    m.time_capped = bool(t.raw.get("timed_out")) or bool(r.raw.get("timed_out"))
    if t.raw.get("peer_dead"):
        m.notes.append("the sender declared its peer dead")
    bad = {k: getattr(r, k) for k in ("corrupted", "duplicated", "reordered") if getattr(r, k)}
    if bad and s.family == "imago":
        m.notes.append("integrity: " + ", ".join(f"{k} {v}" for k, v in bad.items()))
    if s.family == "imago":
        m.retransmits = t.retransmits
        m.frames_sent = t.raw.get("engine_A", t.raw.get("node_1", {})).get("pkts_sent",
                                                                           t.raw.get("node_1", {}).get("frames_sent"))
    else:
        m.frames_sent = t.raw.get("port_A", t.raw.get("port", {})).get("opackets")
    if s.test == RTT:
        rtt = t.raw.get("rtt_us")
        if not rtt or t.msgs_delivered == 0:
            raise MeasureError(f"no round trip completed ({t.msgs_sent} sent); RESULT {json.dumps(t.raw)[:200]}")
    elif r.msgs_delivered == 0:
        raise MeasureError(f"receiver got nothing of {t.msgs_sent} sent")
    _fill(m, s.test == RTT, t, r)
    if s.test != RTT and s.family == "raw" and m.not_delivered:
        m.notes.append(f"link dropped {m.not_delivered} of {t.msgs_sent}")
    return m
