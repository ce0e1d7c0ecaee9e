# SPDX-License-Identifier: BSD-3-Clause
"""imago observed with the tools DPDK users have: Debian's dpdk-telemetry.py and imago-stat.

imagod --pair serves nodes 1 and 2 (hugepages); imago-perf, its secondary, streams through
them for a few seconds. Meanwhile the operator's tools ask the /imago/... telemetry commands:
the counters must be there and must move while the traffic runs (nodes, peers with their
session and round-trip estimate, ports, lcores, endpoints, pools). imago-stat prints one JSON
sample and a refreshing table; pointed at a process that is not there it says so and fails.
imago-perf answers the same node commands on its own prefix.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from framework import host
from framework.apps import ImagoPerf
from framework.imago_apps import (TELEMETRY_PY, ImagodRun, cleanup_stale_hugepages, example_path,
                                  hugepages_missing_reason, telemetry as _telemetry)
from framework.testsuite import TestSuite, require
from framework.topology import Topology

ROOT = Path(__file__).resolve().parents[2]
IMAGO_STAT = ROOT / "apps" / "stat" / "imago-stat"
READY_S = 30.0
#: The stream runs this long: the tools sample it twice, a second apart.
TRAFFIC_S = 8
#: The group-stream counters of docs/PROTOCOL.md 3.7.3 and 3.7.4, as telemetry and imagod name them.
GROUP_KEYS = tuple("group_" + k for k in (
    "msgs_sent", "data_frames", "unicast_copies", "repair_frames", "repair_multicast", "status_sent", "joins",
    "leaves", "expiries", "msgs_received", "acks_sent", "nacks_sent", "dup_received", "overflow", "streams_full",
    "nack_freed", "lost_told", "units_lost", "lost_events", "parity_sent", "parity_rebuilt", "parity_bad",
    "nack_frames_sent", "interests_full"))


def _fake_process(path: str) -> socket.socket:
    """A telemetry socket at @p path that greets as rte_telemetry does and answers imago's
    commands as a process with one idle node would (no ports, endpoints or pools), for any
    number of connections one after the other; close it to stop."""
    answers = {"/imago/lcores": {}, "/imago/nodes": [1], "/imago/node": {"node": 1, "msgs_sent": 0},
               "/imago/peers": [], "/imago/ports": [], "/imago/endpoints": [], "/imago/pools": {}}
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(path)
    srv.listen(4)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:  # closed
                return
            with conn:
                try:
                    conn.send(json.dumps({"version": "DPDK 22.11", "pid": 1, "max_output_len": 16384}).encode())
                    while (cmd := conn.recv(1024).decode()):
                        name = cmd.split(",")[0]
                        conn.send(json.dumps({name: answers.get(name)}).encode())
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return srv


@pytest.fixture
def served(topology: Topology, perf_binary, request: pytest.FixtureRequest):
    """imagod --pair on hugepages, and an imago-perf secondary streaming through it."""
    node, prefix, d = ImagodRun.for_tools(topology, "tel", request, (TELEMETRY_PY,), READY_S)
    perf = ImagoPerf(node, perf_binary).start_args(
        ["--attach", prefix, "--mode", "stream", "--msgs", "1000000000", "--size", "256", "--rate", "200000",
         "--duration", str(TRAFFIC_S), "--quiet"], name="traffic")
    request.addfinalizer(lambda: perf.proc.running and perf.stop())
    perf.wait_ready(READY_S)
    time.sleep(1.0)  # the stream under way
    return node, prefix, d, perf


class TestSuiteTelemetry(TestSuite):
    """rte_telemetry commands read by dpdk-telemetry.py and imago-stat while traffic runs."""

    def test_dpdk_telemetry_py_sees_the_counters_move(self, served) -> None:
        """
        Steps:
            While a paced stream (200000 msgs/s of 256 B) runs node 1 -> node 2 through
            imagod, ask dpdk-telemetry.py for /imago/nodes, /imago/node,1, /imago/peer,1,2,
            /imago/ports, /imago/lcores, /imago/endpoints and /imago/pools; again a second later.
        Verify:
            Nodes 1 and 2; node 1's msgs_sent and link_frames_out grow between the samples;
            peer 2 of node 1 is established with a round-trip estimate; both ports count
            packets; the engine lcore's busy cycles grow; the two endpoints named imago-perf are
            open; the pools report their sizes.
        """
        node, prefix, _, _ = served
        cmds = ["/imago/nodes", "/imago/node,1", "/imago/peer,1,2", "/imago/ports", "/imago/lcores",
                "/imago/endpoints", "/imago/pools"]
        first = _telemetry(node, prefix, cmds)
        time.sleep(1.0)
        second = _telemetry(node, prefix, cmds)
        print("first", json.dumps(first)[:2000])
        print("second", json.dumps(second)[:2000])
        nodes, n1, peer, ports, lcores, eps, pools = second
        self.verify(sorted(nodes) == [1, 2], f"/imago/nodes {nodes}")
        for key in ("msgs_sent", "link_frames_out", "pkts_sent"):
            self.verify(n1[key] > first[1][key], f"node 1 {key} did not move: {first[1][key]} -> {n1[key]}")
        self.verify(peer["state"] == "established" and peer["srtt_ns"] > 0, f"/imago/peer,1,2 {peer}")
        self.verify(peer["msgs_sent"] > 0 and peer["peer"] == 2, f"/imago/peer,1,2 {peer}")
        self.verify(len(ports) == 2, f"/imago/ports {ports}")
        busy = {k: v for k, v in lcores.items() if k.endswith("_busy_cycles")}
        self.verify(any(v > first[4].get(k, 0) for k, v in busy.items()), f"no lcore got busier: {lcores}")
        self.verify(len(eps) == 2, f"/imago/endpoints {eps}")
        ep = _telemetry(node, prefix, [f"/imago/endpoint,{eps[0]}"])[0]
        self.verify(ep["name"] == "imago-perf" and ep["peer"] in (1, 2), f"/imago/endpoint {ep}")
        self.verify(pools["msgs_size"] > 0 and pools["mbufs_size"] > 0, f"/imago/pools {pools}")
        port = _telemetry(node, prefix, [f"/imago/ports,{ports[0]}"])[0]
        self.verify(port["opackets"] > 0 and port["ipackets"] > 0, f"/imago/ports,{ports[0]} {port}")
        self.verify(re.fullmatch(r"([0-9A-F]{2}:){5}[0-9A-F]{2}", port.get("mac", ""), re.I) is not None,
                    f"/imago/ports,{ports[0]}: no MAC address {port}")

    def test_bad_parameters_get_no_answer_and_hurt_nothing(self, served) -> None:
        """
        Steps:
            Ask the commands with hostile parameters: none where one is needed, letters,
            negative and huge numbers, a missing second id, extra commas, an unknown node,
            peer, port or endpoint slot; then a good command.
        Verify:
            Each bad one is answered with null (DPDK's reply to a command that refused), the
            good one still answers, and imagod still runs.
        """
        node, prefix, d, _ = served
        bad = ["/imago/node", "/imago/node,abc", "/imago/node,-1", "/imago/node,99999999999999999999999",
               "/imago/node,1,2", "/imago/peers,", "/imago/peer,1", "/imago/peer,1,", "/imago/peer,1,2,3",
               "/imago/peer,7,2", "/imago/peer,1,9", "/imago/ports,70000", "/imago/ports,5", "/imago/endpoint",
               "/imago/endpoint,32", "/imago/endpoint,x", "/imago/endpoint,31"]
        answers = _telemetry(node, prefix, bad + ["/imago/nodes"])
        for cmd, a in zip(bad, answers):
            self.verify(a is None, f"{cmd} answered {a}")
        self.verify(sorted(answers[-1]) == [1, 2], f"/imago/nodes after the bad ones: {answers[-1]}")
        self.verify(d.proc.running, "imagod exited")

    def test_imago_stat_table_and_json(self, served) -> None:
        """
        Steps:
            While the stream runs: imago-stat -f PREFIX --json; then imago-stat -n 2 -i 0.5
            (two refreshes, not a terminal).
        Verify:
            The JSON sample has nodes 1 and 2 with peer 2 of node 1 established and the
            endpoints; the table shows the node, peer, port and endpoint headers and a nonzero
            message rate on node 1 in its second refresh.
        """
        node, prefix, _, _ = served
        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "--json"], timeout=30, check=False)
        self.verify(cp.returncode == 0, f"imago-stat --json exited {cp.returncode}: {cp.stderr}")
        s = json.loads(cp.stdout)
        self.verify(sorted(s["nodes"]) == ["1", "2"], f"nodes {list(s['nodes'])}")
        self.verify(s["nodes"]["1"]["peer_list"]["2"]["state"] == "established", "peer 2 of node 1 not established")
        self.verify(len(s["endpoints"]) == 2, f"endpoints {s['endpoints']}")
        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "-n", "2", "-i", "0.5"], timeout=30,
                       check=False)
        print(cp.stdout)
        self.verify(cp.returncode == 0, f"imago-stat exited {cp.returncode}: {cp.stderr}")
        for header in ("msgs out/s", "node>peer", "pkts in/s", "endpoint", "pools:"):
            self.verify(header in cp.stdout, f"no {header!r} in the table")
        second = cp.stdout.split("imago-stat ")[-1]
        row = next(l for l in second.splitlines() if l.strip().startswith("1 "))
        self.verify(row.split()[1] not in ("0", "0.00"), f"node 1 sends nothing in the second refresh: {row}")

    def test_group_counters_reach_telemetry_imago_stat_and_imagods_line(self, topology: Topology,
                                                                        request: pytest.FixtureRequest) -> None:
        """
        Steps:
            imagod --pair whose ports receive 5 % of frames twice and 1 % damaged (--fault-rx
            dup=0.05,corrupt=0.01) and
            prints its statistics every half second; imago-group sub and pub attach to it and
            stream 20000 messages from node 1 to group 7, which node 2 joined. Then ask
            dpdk-telemetry.py for /imago/node,2, imago-stat --json, and /imago/node,2 again.
        Verify:
            The member (node 2) has every message; /imago/node,2 holds every group counter of
            docs/PROTOCOL.md 3.7.4 as group_<name>, and group_dup_received counts the
            duplicated GROUP_DATA frames (above 0); imago-stat --json says the same of node 2,
            and its table has the group block, and a rejected count of node 2 no smaller than the
            reject_* sum of --json; imagod's "node 2 counters:" line holds every
            group_* key, group_dup_received at least that value.
        """
        for tool in (TELEMETRY_PY, example_path("imago-group")):
            if not Path(tool).exists():
                pytest.skip(f"{tool} is not there")
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node("grp")
        prefix = f"{topology.prefix}-grp"
        d = ImagodRun.start(node, prefix, nodes=["--pair", "--fault-rx", "dup=0.05,corrupt=0.01", "--seed", "3"])
        request.addfinalizer(d.cleanup)
        d.proc.wait_for_line("serving 2 node(s)", READY_S, stream="stdout")
        count = 20000
        group = [str(example_path("imago-group"))]
        sub = node.start(group + ["sub", "--secondary", prefix, "--count", str(count), "--timeout", "30"], name="sub")
        sub.wait_for_line("READY", READY_S, stream="stdout")
        pub = node.start(group + ["pub", "--secondary", prefix, "--count", str(count), "--timeout", "30"], name="pub")
        self.verify(pub.wait(120) == 0, f"pub failed; last lines:\n{pub.tail()}")
        self.verify(sub.wait(120) == 0, f"sub failed; last lines:\n{sub.tail()}")
        time.sleep(1.0)  # the boards published after the last frame

        n2 = _telemetry(node, prefix, ["/imago/node,2"])[0]
        print("node 2", json.dumps({k: v for k, v in n2.items() if k.startswith("group_")}))
        missing = [k for k in GROUP_KEYS if k not in n2]
        self.verify(not missing, f"/imago/node,2 lacks {missing}")
        self.verify(n2["group_msgs_received"] >= count, f"group_msgs_received {n2['group_msgs_received']}")
        dups = n2["group_dup_received"]
        self.verify(dups > 0, f"5 % of frames received twice and group_dup_received {dups}")

        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "--json"], timeout=30, check=False)
        self.verify(cp.returncode == 0, f"imago-stat --json exited {cp.returncode}: {cp.stderr}")
        later = _telemetry(node, prefix, ["/imago/node,2"])[0]["group_dup_received"]
        stat = json.loads(cp.stdout)["nodes"]["2"]
        self.verify(dups <= stat.get("group_dup_received", -1) <= later,
                    f"imago-stat --json group_dup_received {stat.get('group_dup_received')}, telemetry {dups}..{later}")
        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "-n", "1"], timeout=30, check=False)
        print(cp.stdout)
        self.verify(cp.returncode == 0 and "group in/s" in cp.stdout, f"no group block: {cp.stdout} {cp.stderr}")
        # The rejected column counts the engine's rejections too (the damaged frames' CRCs):
        # it read link_decode_rejected alone, 0 here (an outside tester).
        engine_rejects = sum(v for k, v in stat.items() if k.startswith("reject_"))
        row = next(ln for ln in cp.stdout.splitlines() if ln.split()[:1] == ["2"])
        self.verify(engine_rejects > 0 and int(row.split()[6]) >= engine_rejects,
                    f"imago-stat's node 2 row {row!r}, reject_* in --json {engine_rejects}")

        def counters_line():
            lines = [ln for ln in d.lines() if ln.startswith("node 2 counters:")]
            if not lines:
                return None
            fields = dict(kv.split("=") for kv in lines[-1].split(":", 1)[1].split())
            return fields if int(fields.get("group_dup_received", -1)) >= dups else None

        fields = d.wait_until("a node 2 counters line with group_dup_received", counters_line, 10.0)
        missing = [k for k in GROUP_KEYS if k not in fields]
        self.verify(not missing, f"imagod's node 2 counters line lacks {missing}")

    def test_imago_stat_on_a_process_whose_commands_are_gone_fails_clearly(self, tmp_path: Path) -> None:
        """
        Steps:
            A telemetry socket that greets as rte_telemetry does and answers every command
            with null (a DPDK process stopping: imago's commands are gone); imago-stat --socket
            on it, --json and the table.
        Verify:
            Exit 1 saying no imago command answered (before: an empty sample, exit 0: an outside
            tester took it for an idle process).
        """
        path = str(tmp_path / "dpdk_telemetry.v2")
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        srv.bind(path)
        srv.listen(1)

        def serve() -> None:
            conn, _ = srv.accept()
            with conn:
                conn.send(json.dumps({"version": "DPDK 22.11", "pid": 1, "max_output_len": 16384}).encode())
                while (cmd := conn.recv(1024).decode()):
                    conn.send(json.dumps({cmd.split(",")[0]: None}).encode())

        for args in (["--json"], ["-n", "1"]):
            th = threading.Thread(target=serve, daemon=True)
            th.start()
            cp = subprocess.run(["/usr/bin/python3", str(IMAGO_STAT), "--socket", path, *args], capture_output=True,
                                text=True, timeout=30)
            th.join(10)
            self.verify(cp.returncode == 1 and "no answer to /imago/lcores" in cp.stderr,
                        f"{args}: exit {cp.returncode}, stdout {cp.stdout[:200]!r}, stderr {cp.stderr!r}")
        srv.close()

    def test_imago_stat_without_a_process_fails_clearly(self, topology: Topology) -> None:
        """
        Steps:
            imago-stat -f a prefix no process uses.
        Verify:
            Exit status 1 and a message naming the socket.
        """
        cp = topology.add_node("nostat").exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", "imago-none-here", "--json"],
                                              timeout=30, check=False)
        self.verify(cp.returncode == 1, f"exit {cp.returncode}")
        self.verify("imago-none-here" in cp.stderr and "cannot reach" in cp.stderr, cp.stderr)

    def test_imago_stat_refuses_an_ambiguous_prefix(self, topology: Topology) -> None:
        """
        Steps:
            imago-stat with -f twice, with an empty prefix, with one holding a '/', and with -f
            and --socket both.
        Verify:
            Each exits 2 (bad usage) naming what is wrong: it never silently reads another
            process than the one the operator meant.
        """
        node = topology.add_node("badstat")
        for args, says in ((["-f", "a", "-f", "b"], "more than once"), (["-f", ""], "bad --file-prefix"),
                           (["-f", "../imago"], "bad --file-prefix"),
                           (["-f", "a", "--socket", "/nonexistent/s"], "two ways"),
                           # Read as no --socket before: the default prefix's socket (an outside tester).
                           (["--socket", ""], "--socket ''")):
            cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), *args, "--json"], timeout=30, check=False)
            self.verify(cp.returncode == 2 and says in cp.stderr, f"{args}: exit {cp.returncode}: {cp.stderr}")

    def test_imago_stat_says_a_path_that_is_no_socket_is_none(self, tmp_path: Path) -> None:
        """
        Steps:
            imago-stat --socket on a folder, and on a regular file.
        Verify:
            Exit 1 saying the path is not a socket, and what it is (before: "Connection refused",
            as if a process there had stopped: an outside tester).
        """
        (tmp_path / "dir").mkdir()
        (tmp_path / "file").write_text("x")
        for name, kind in (("dir", "a folder"), ("file", "a regular file")):
            cp = subprocess.run(["/usr/bin/python3", str(IMAGO_STAT), "--socket", str(tmp_path / name), "--json"],
                                capture_output=True, text=True, timeout=30)
            self.verify(cp.returncode == 1 and f"not a socket but {kind}" in cp.stderr,
                        f"{name}: exit {cp.returncode}, stderr {cp.stderr!r}")

    def test_imago_stat_ends_quietly_when_its_reader_leaves_and_owns_its_output_errors(self, tmp_path: Path) -> None:
        """
        Steps:
            A telemetry socket answering as a process with one idle node; imago-stat --socket
            on it: -n 5 -i 0.3 piped into head -1 (bash, pipefail); -n 1 and --json with their
            output on /dev/full.
        Verify:
            The first prints the table's first line and exits 0 with nothing on stderr (the
            reader left: Unix tools stop quietly); the others exit 1 saying imago-stat could not
            write its output (no space left), not that the process stopped answering. Before:
            exit 1, "the process stopped answering: [Errno 32] Broken pipe" (and [Errno 28]).
        """
        path = str(tmp_path / "dpdk_telemetry.v2")
        srv = _fake_process(path)
        try:
            stat = f"/usr/bin/python3 {IMAGO_STAT} --socket {path}"
            cp = subprocess.run(["bash", "-o", "pipefail", "-c", f"{stat} -n 5 -i 0.3 | head -1"], capture_output=True,
                                text=True, timeout=30)
            self.verify(cp.returncode == 0 and cp.stdout.startswith("imago-stat ") and cp.stderr == "",
                        f"| head -1: exit {cp.returncode}, stdout {cp.stdout!r}, stderr {cp.stderr!r}")
            for args in (["-n", "1"], ["--json"]):
                with open("/dev/full", "w") as full:
                    cp = subprocess.run(["/usr/bin/python3", str(IMAGO_STAT), "--socket", path, *args], stdout=full,
                                        stderr=subprocess.PIPE, text=True, timeout=30)
                self.verify(cp.returncode == 1 and "imago-stat: cannot write its output: No space left on device"
                            in cp.stderr and "stopped answering" not in cp.stderr,
                            f"{args} > /dev/full: exit {cp.returncode}, stderr {cp.stderr!r}")
        finally:
            srv.shutdown(socket.SHUT_RDWR)  # wakes its accept()
            srv.close()

    def test_imago_perf_answers_on_its_own_prefix(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            imago-perf --pair --mode stream, paced to last a few seconds; ask imago-stat --json on
            imago-PID while it runs.
        Verify:
            Its two engines (nodes 1 and 2) answer with counters that show the stream.
        """
        node = topology.add_node("perftel")
        run = ImagoPerf(node, perf_binary).start_args(
            ["--pair", "--mode", "stream", "--msgs", "600000", "--rate", "200000", "--quiet"], name="perf")
        run.wait_ready(READY_S)
        time.sleep(1.0)
        prefix = f"imago-{self._perf_pid(run)}"
        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "--json"], timeout=30, check=False)
        run.result(timeout=60)
        self.verify(cp.returncode == 0, f"imago-stat exited {cp.returncode}: {cp.stderr}")
        s = json.loads(cp.stdout)
        self.verify(sorted(s["nodes"]) == ["1", "2"], f"nodes {list(s['nodes'])}")
        self.verify(s["nodes"]["1"]["msgs_sent"] > 0, f"node 1 {s['nodes']['1']}")

    def test_imago_stat_shows_each_network_of_a_node_on_two(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            imago-perf --pair --redundancy ping-pong --mode stream, paced to last a few
            seconds; imago-stat -n 1 (the table) on imago-PID while it runs.
        Verify:
            The table has a line for each network of each node, with its state (up,
            suspect or down). Before, only --json had the networks (an outside tester).
        """
        node = topology.add_node("perfnet")
        run = ImagoPerf(node, perf_binary).start_args(
            ["--pair", "--redundancy", "ping-pong", "--mode", "stream", "--msgs", "600000", "--rate", "200000",
             "--quiet"], name="perf")
        run.wait_ready(READY_S)
        time.sleep(1.0)
        prefix = f"imago-{self._perf_pid(run)}"
        cp = node.exec(["/usr/bin/python3", str(IMAGO_STAT), "-f", prefix, "-n", "1"], timeout=30, check=False)
        run.result(timeout=60)
        print(cp.stdout)
        self.verify(cp.returncode == 0 and "fail-overs" in cp.stdout, f"no network block: {cp.stdout} {cp.stderr}")
        rows = [ln.split() for ln in cp.stdout.splitlines()]
        nets = {(r[0], r[1]): r[2] for r in rows if len(r) >= 8 and r[1] in ("A", "B") and r[0] in ("1", "2")}
        self.verify(sorted(nets) == [("1", "A"), ("1", "B"), ("2", "A"), ("2", "B")], f"network lines {nets}")
        # A state each: the table's point. Which one is the redundancy suites' to check (on a
        # loaded machine spurious RTO losses can mark a network down: an open defect).
        self.verify(all(v in ("up", "suspect", "down") for v in nets.values()), f"states {nets}")

    def test_a_kernel_interface_port_says_its_interface_is_down_or_gone(self, topology: Topology, perf_binary) -> None:
        """
        Steps:
            imago-perf --iface on one end of a veth (net_af_packet), waiting for a sender;
            /imago/ports,0 through dpdk-telemetry.py; the interface set down, then deleted.
        Verify:
            link_up 1 and iface up first, then link_up 0 with iface down, then gone. Before,
            link_up stayed 1 through both (the PMD's own status: an outside tester).
        """
        a, b = topology.add_veth(topology.add_node("ka"), topology.add_node("kb"), mtu=1500)
        run = ImagoPerf(b.node, perf_binary).start_args(
            ["--iface", b.name, "--role", "rx", "--mode", "stream", "--msgs", "1000", "--duration", "20", "--quiet"],
            name="perf")
        run.wait_ready(READY_S)
        prefix = f"imago-{self._perf_pid(run)}"

        def port() -> dict:
            return _telemetry(b.node, prefix, ["/imago/ports,0"])[0]

        first, until = port(), time.monotonic() + 5
        while first.get("iface") != "up" and time.monotonic() < until:  # the veth's carrier may come later
            time.sleep(0.1)
            first = port()
        seen = [first]
        host.run_cmd(["ip", "-n", b.node.netns, "link", "set", b.name, "down"])
        seen.append(port())
        host.run_cmd(["ip", "-n", b.node.netns, "link", "del", b.name])
        seen.append(port())
        run.stop()
        got = [(p.get("link_up"), p.get("iface")) for p in seen]
        print("link_up, iface:", got)
        self.verify(got == [(1, "up"), (0, "down"), (0, "gone")], f"link_up, iface: {got}")

    @staticmethod
    def _perf_pid(run) -> int:
        """The pid of imago-perf itself (the harness starts it through ip netns exec and stdbuf)."""
        out = subprocess.run(["pgrep", "-P", str(run.proc.popen.pid)], capture_output=True, text=True).stdout.split()
        pid = run.proc.popen.pid
        while out:  # follow the exec chain down to the last child
            pid = int(out[0])
            out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        return pid
