# SPDX-License-Identifier: BSD-3-Clause
"""imago-perf's reliable modes through imago.h (``--via api``): the path applications use.

Three shapes, as an application runs them: the library embedded with both nodes in one
process (``--pair``, net_ring); a secondary of ``imagod --pair`` (``--attach PREFIX``,
hugepages); one embedded process per node over a veth pair (``--role tx|rx --iface``), with
injected receive loss. In each, every message must arrive once, in order, intact (imago-perf
checks each one's sequence number and CRC32C), and the RESULT line must carry the engine's
counters, read through ``imago_node_stats_get()``. Options the library does not take are
refused with exit status 2 and the reason.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from framework.apps import ImagoPerf, Result
from framework.imago_apps import ImagodRun, cleanup_stale_hugepages, hugepages_missing_reason
from framework.testsuite import TestSuite, require
from framework.topology import Topology

READY_S = 30.0
RUN_S = 120.0
#: Each mode with a count that runs in a few seconds on a loaded 2-core machine.
MODES = {"stream": 300_000, "echo": 50_000, "pingpong": 5_000}


def _run(perf: ImagoPerf, args: list[str], name: str) -> Result:
    run = perf.start_args(args + ["--duration", str(int(RUN_S))], name=name)
    res = run.result(timeout=RUN_S + READY_S)
    print(name, "RESULT", json.dumps(res.raw))
    return res


class TestSuitePerfViaApi(TestSuite):
    """stream, echo and pingpong through imago.h endpoints: embedded, secondary, per process."""

    def _verify(self, r: Result, mode: str, msgs: int, attach: str) -> None:
        self.verify(r.raw["via"] == "api" and r.raw["attach"] == attach, f"not the {attach} API path: {r.raw}")
        self.verify(r.raw["ended"] == "done", f"the run ended by {r.raw['ended']}, not done")
        self.verify(r.msgs_sent == msgs and r.msgs_delivered == msgs, f"{r.msgs_delivered} of {msgs} delivered")
        for key in ("lost", "duplicated", "reordered", "corrupted"):
            self.verify(getattr(r, key) == 0, f"{key} = {getattr(r, key)}")
        frames = sum(v.get("frames_sent", 0) for k, v in r.raw.items() if k.startswith("node_"))
        self.verify(frames > 0, "no node counted a frame sent: imago_node_stats_get() read nothing")
        if mode != "stream":
            rtt = r.raw["rtt_us"]
            self.verify(0 < rtt["p50"] <= rtt["p99"] <= rtt["max"], f"rtt_us out of order: {rtt}")

    def test_embedded_pair(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            In one namespace, run imago-perf --via api (the embedded default: nodes 1 and 2 in
            the process over net_ring) in each of stream, echo and pingpong, 64-byte messages,
            and stream once more with 1000-byte ones.
        Verify:
            Every message delivered once, in order, intact, the run ended done; the round
            trips' percentiles are ordered; the nodes counted frames. The same again for stream
            and pingpong with --run-to-completion (no engine lcore).
        """
        perf = ImagoPerf(topology.add_node("api"), perf_binary)
        for mode, msgs in MODES.items():
            r = _run(perf, ["--via", "api", "--mode", mode, "--msgs", str(msgs), "--size", "64", "--quiet"],
                     f"embedded-{mode}")
            self._verify(r, mode, msgs, "embedded")
        r = _run(perf, ["--via", "api", "--mode", "stream", "--msgs", "100000", "--size", "1000"], "embedded-1k")
        self._verify(r, "stream", 100_000, "embedded")
        # Run-to-completion: no engine lcore, imago-perf's thread polls the nodes.
        for mode, msgs in (("stream", 300_000), ("pingpong", 5_000)):
            r = _run(perf, ["--via", "api", "--run-to-completion", "--mode", mode, "--msgs", str(msgs), "--quiet"],
                     f"rtc-{mode}")
            self._verify(r, mode, msgs, "embedded")
            self.verify(r.raw["run_to_completion"] is True, f"not run-to-completion: {r.raw}")

    def test_secondary_of_imagod(self, topology: Topology, perf_binary, request: pytest.FixtureRequest) -> None:
        """
        Steps:
            Start imagod --pair (hugepages); run imago-perf --attach PREFIX in stream, echo
            and pingpong, one process after the other.
        Verify:
            As test_embedded_pair, each run counted from its own start (the nodes' counters
            before it are subtracted); imagod still serves afterwards.
        """
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node("mp")
        prefix = f"{topology.prefix}-perfapi"
        d = ImagodRun.serving_pair(node, prefix, request, READY_S)
        perf = ImagoPerf(node, perf_binary)
        for mode, msgs in MODES.items():
            r = _run(perf, ["--attach", prefix, "--mode", mode, "--msgs", str(msgs), "--quiet"], f"secondary-{mode}")
            self._verify(r, mode, msgs, "secondary")
            self.verify(r.raw["node_2"]["msgs_received"] >= msgs,
                        f"node 2 counted {r.raw['node_2']['msgs_received']} messages received in this run")
        self.verify(d.proc.running, "imagod exited under its applications")

    @pytest.mark.parametrize("size,msgs", [(256, 50_000), (4000, 20_000)])
    def test_processes_over_veth_with_loss(self, topology: Topology, perf_binary, size, msgs) -> None:
        """
        Steps:
            Two namespaces joined by a veth; in each an imago-perf --via api --role (rx
            first, then tx) embedding the library on net_af_packet; the receiver's node drops
            5 % of the frames it receives (--fault-rx loss=0.05). Stream 50000 messages of
            256 bytes; then 20000 of 4000 bytes (above half a frame: sent by reference,
            chained from the application's buffers, three frames each).
        Verify:
            The receiver got every message once, in order, intact; the sender finished only
            once its node had nothing in flight (ended done) and retransmitted. At 4000 bytes
            the sender's node sent messages by reference (msgs_by_ref: those sent while fewer
            than half the big pool's buffers were held so), at 256 none.
        """
        tx_if, rx_if = topology.add_veth(topology.add_node("tx"), topology.add_node("rx"))
        common = ["--via", "api", "--mode", "stream", "--msgs", str(msgs), "--size", str(size),
                  "--duration", str(int(RUN_S))]
        rx = ImagoPerf(rx_if.node, perf_binary).start_args(
            common + ["--role", "rx", "--iface", rx_if.name, "--peer", f"1@{tx_if.mac}",
                      "--fault-rx", "loss=0.05,seed=3", "--idle-timeout-ms", "5000"], name="api-rx")
        rx.wait_ready(READY_S)
        tx = ImagoPerf(tx_if.node, perf_binary).start_args(
            common + ["--role", "tx", "--iface", tx_if.name, "--peer", f"2@{rx_if.mac}"], name="api-tx")
        t = tx.result(timeout=RUN_S + READY_S)
        r = rx.result(timeout=READY_S)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        self.verify(t.raw["ended"] == "done", f"the sender ended by {t.raw['ended']}")
        self.verify(r.msgs_delivered == msgs, f"rx delivered {r.msgs_delivered} of {msgs}")
        for key in ("duplicated", "reordered", "corrupted"):
            self.verify(getattr(r, key) == 0, f"rx {key} = {getattr(r, key)}")
        self.verify(t.retransmits > 0, "5 % receive loss and the sender never retransmitted")
        by_ref = t.raw["node_1"]["msgs_by_ref"]
        self.verify(by_ref > 0 if size > 1000 else by_ref == 0, f"{by_ref} of {msgs} messages sent by reference")

    @pytest.mark.parametrize("dead_after", ["300", "100"])
    @pytest.mark.parametrize("via", [[], ["--via", "api"]], ids=["engine", "api"])
    def test_a_receiver_started_long_before_its_sender_waits_for_it(self, topology: Topology, perf_binary,
                                                                   via, dead_after) -> None:
        """
        Steps:
            Two namespaces joined by a veth; imago-perf --role rx with --dead-after-ms 300
            (or 100: shorter than the 200 ms a receiver lingers, so the sender, gone once all
            is confirmed, is declared dead before the receiver's linger ends), then, 1.5 s
            later (its node has declared the sender's dead, and heard the new veth's own
            frames), --role tx: a stream of 20000 messages. Through the engine, and through
            imago.h.
        Verify:
            The receiver waited: it got every message and ended done, not peer_dead (a
            peer never up is not dead to the run, nor is a sender that left once all
            arrived), and so did the sender.
        """
        tx_if, rx_if = topology.add_veth(topology.add_node("tx"), topology.add_node("rx"))
        common = [*via, "--mode", "stream", "--msgs", "20000", "--dead-after-ms", dead_after, "--duration", "30"]
        rx = ImagoPerf(rx_if.node, perf_binary).start_args(
            common + ["--role", "rx", "--iface", rx_if.name, "--peer", f"1@{tx_if.mac}"], name="early-rx")
        rx.wait_ready(READY_S)
        time.sleep(1.5)
        tx = ImagoPerf(tx_if.node, perf_binary).start_args(
            common + ["--role", "tx", "--iface", tx_if.name, "--peer", f"2@{rx_if.mac}"], name="late-tx")
        t = tx.result(timeout=RUN_S)
        r = rx.result(timeout=READY_S)
        print("tx RESULT", json.dumps(t.raw))
        print("rx RESULT", json.dumps(r.raw))
        self.verify(r.raw["ended"] == "done" and not r.raw["peer_dead"], f"the receiver ended {r.raw['ended']}")
        self.verify(r.msgs_delivered == 20000 and r.lost == 0, f"rx delivered {r.msgs_delivered} of 20000")
        self.verify(t.raw["ended"] == "done", f"the sender ended {t.raw['ended']}")

    @pytest.mark.parametrize("via", [[], ["--via", "api"]], ids=["engine", "api"])
    def test_a_sender_whose_receiver_never_comes_does_not_end_done(self, topology: Topology, perf_binary,
                                                                   via) -> None:
        """
        Steps:
            Two namespaces joined by a veth; imago-perf --role tx alone (no receiver ever),
            --dead-after-ms 300, --duration 3: a stream of 20000 messages. Through the engine,
            and through imago.h.
        Verify:
            Its node declares the absent receiver dead. Through the engine the sender had
            queued its messages, which went with the death: the run ends peer_dead, counting
            them discarded (a sender started first cannot wait: it would end done with
            everything lost). Through imago.h the sender waits for the receiver's endpoint
            before it sends: nothing is lost, and the run ends at --duration.
        """
        tx_if, rx_if = topology.add_veth(topology.add_node("tx"), topology.add_node("rx"))
        tx = ImagoPerf(tx_if.node, perf_binary).start_args(
            [*via, "--mode", "stream", "--msgs", "20000", "--dead-after-ms", "300", "--duration", "3",
             "--role", "tx", "--iface", tx_if.name, "--peer", f"2@{rx_if.mac}"], name="lone-tx")
        t = tx.result(timeout=RUN_S)
        print("tx RESULT", json.dumps(t.raw))
        if via:
            self.verify(t.raw["ended"] == "duration" and t.msgs_delivered == 0, f"the sender ended {t.raw['ended']}")
        else:
            self.verify(t.raw["ended"] == "peer_dead" and t.raw["peer_dead"], f"the sender ended {t.raw['ended']}")
            self.verify(t.raw["engine_A"]["discarded_msgs"] > 0, f"nothing discarded: {t.raw['engine_A']}")

    @pytest.mark.parametrize("args,reason", [
        (["--via", "api", "--mode", "raw"], "reliable modes"),
        (["--via", "api", "--mode", "stream", "--loss", "0.1"], "--loss has no meaning with --via api"),
        (["--via", "api", "--mode", "stream", "--loss", "0"], "--loss has no meaning with --via api"),  # its default
        (["--attach", "nowhere", "--mode", "stream", "--mtu", "9000"], "give --mtu to imagod"),
        (["--via", "api", "--mode", "pingpong", "-i"], "no -i"),
        (["--mode", "stream", "--run-to-completion"], "give --via api too"),
        (["--attach", "nowhere", "--mode", "stream", "--run-to-completion"], "drives an embedded library"),
        # Each with its own reason (before: one about tx faults and rings for all of them):
        (["--via", "api", "--mode", "rate", "--rate", "1000", "--arrivals", "/tmp/imago-arrivals.csv"],
         "--arrivals has no meaning with --via api: the library's receiving end keeps no arrival times"),
        (["--via", "api", "--mode", "stream", "--ring-size", "64"], "it sizes imago-perf's own net_ring pair"),
        (["--via", "api", "--mode", "stream", "--fault-tx", "loss=0.1"], "give the spec as --fault-rx"),
        (["--attach", "nowhere", "--mode", "stream", "--vdev", "net_null0"], "give --vdev to imagod"),
    ])
    def test_options_the_library_does_not_take_are_refused(self, topology: Topology, perf_binary, args,
                                                            reason) -> None:
        """
        Steps:
            imago-perf --via api with an option that has no meaning through the library (a
            raw mode, a tx fault, a node option with --attach, the prompt).
        Verify:
            Exit status 2 and the reason on stderr; no RESULT line.
        """
        cp = topology.add_node("refuse").exec([str(perf_binary)] + args, timeout=30, check=False)
        self.verify(cp.returncode == 2, f"exit {cp.returncode}: {cp.stderr}")
        self.verify(reason in cp.stderr, f"stderr lacks {reason!r}: {cp.stderr}")
        self.verify("RESULT" not in cp.stdout, "a refused run printed a RESULT")

    def test_the_cluster_key_and_vdevs_go_to_the_library(self, topology: Topology, perf_binary,
                                                          tmp_path: Path) -> None:
        """
        Steps:
            Two namespaces joined by a veth; imago-perf --via api --role rx --auth-key K (the
            library embedded), then --via api --role tx --auth-key K: a stream of 20000
            messages. Again with a sender without the key, for 3 s. Then imago-perf --via api
            --role rx --vdev net_null0 --duration 1.
        Verify:
            With the key on both ends all 20000 are delivered, ended done (before: --auth-key
            refused with --via api, exit 2, though imago_attach_embedded() takes it); a sender
            without it delivers nothing and the receiver's node rejects its frames (so the
            key was the library's). The --vdev run runs and ends at --duration, exit 0
            (before: refused, though USER.md gives --vdev as the other way to name the port).
        """
        key = tmp_path / "cluster.key"
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        tx_if, rx_if = topology.add_veth(topology.add_node("tx"), topology.add_node("rx"))
        results = []
        for tx_key, duration in ((["--auth-key", str(key)], "30"), ([], "3")):
            common = ["--via", "api", "--mode", "stream", "--msgs", "20000", "--duration", duration]
            rx = ImagoPerf(rx_if.node, perf_binary).start_args(
                [*common, "--auth-key", str(key), "--role", "rx", "--iface", rx_if.name, "--peer", f"1@{tx_if.mac}"],
                name="key-rx")
            rx.wait_ready(READY_S)
            tx = ImagoPerf(tx_if.node, perf_binary).start_args(
                [*common, *tx_key, "--role", "tx", "--iface", tx_if.name, "--peer", f"2@{rx_if.mac}"], name="key-tx")
            t = tx.result(timeout=RUN_S)
            r = rx.result(timeout=RUN_S)
            print("tx RESULT", json.dumps(t.raw))
            print("rx RESULT", json.dumps(r.raw))
            results.append((t, r))
        (t, r), (_, r_nokey) = results
        self.verify(r.msgs_delivered == 20000 and r.raw["ended"] == "done",
                    f"same key: rx delivered {r.msgs_delivered} of 20000, ended {r.raw['ended']}")
        self.verify(t.raw["ended"] == "done", f"same key: the sender ended {t.raw['ended']}")
        self.verify(r_nokey.msgs_delivered == 0 and r_nokey.raw["node_2"]["frames_rejected"] > 0,
                    f"a sender without the key: {r_nokey.msgs_delivered} delivered, node_2 {r_nokey.raw['node_2']}")
        cp = topology.add_node("vdev").exec([str(perf_binary), "--via", "api", "--mode", "stream", "--role", "rx",
                                             "--vdev", "net_null0", "--duration", "1", "--quiet"],
                                            timeout=60, check=False)
        self.verify(cp.returncode == 0 and '"ended":"duration"' in cp.stdout,
                    f"--vdev through the library: exit {cp.returncode}, {cp.stderr[-400:]!r}")
