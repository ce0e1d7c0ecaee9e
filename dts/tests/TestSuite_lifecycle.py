# SPDX-License-Identifier: BSD-3-Clause
"""How imago's apps start and stop: SIGTERM mid-run, bad options, the daemon's shutdown.

A DPDK user expects an app to release its ports and EAL when told to stop, to still report
what it measured, and to refuse a bad command line with a clear message instead of starting.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from framework.apps import (EalConfig, ImagoPerf, RawParams, Role, build_dir, imagod_binary, result_line_object,
                            results_in, run_app)
from framework.imago_apps import ExampleParams, ImagodRun, example_path, start_example
from framework.testsuite import TestSuite
from framework.topology import Topology


class TestSuiteLifecycle(TestSuite):
    """Start-up and shutdown of imago-perf and imagod."""

    def test_sigterm_stops_a_waiting_receiver_cleanly(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Start an rx imago-perf on a veth that no sender uses; wait for READY; send SIGTERM.
        Verify:
            It exits 0 within 10 s, says it was stopped by a signal, and its last line is a
            RESULT with nothing delivered.
        """
        node = topology.add_node("rx")
        peer = topology.add_node("idle")
        _, rx_if = topology.add_veth(peer, node)
        run = ImagoPerf(node).start_raw(rx_if, RawParams(role=Role.RX, msgs=1000, duration_s=120), lcore=1)
        run.wait_ready(30)
        run.proc.signal(signal.SIGTERM)
        res = run.result(timeout=10)
        self.verify(any("Stopped by a signal" in line for line in run.proc.lines("stdout")),
                    "no 'Stopped by a signal' line")
        self.verify(res.msgs_delivered == 0, f"delivered {res.msgs_delivered} with no sender")

    def test_bad_options_are_refused_with_a_message(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Run imago-perf with an unknown option, an out-of-range size, --pair with --role,
            a bad fault spec, network B on network A's interface, --src-ip-b without UDP,
            --failback-ms with duplicate, options the run would not read (--ping-timeout-us
            outside raw-pingpong, --rate with pingpong, a protocol option with raw, --send-copy
            with pingpong, UDP addresses with l2, --pmd without --iface, --iface with EAL
            args; with their default values too), --peer ID@MAC and another --peer-mac; run
            --help.
        Verify:
            Each bad line exits 2 before EAL starts and names what is wrong on stderr;
            --help exits 0 and lists options with their defaults.
        """
        node = topology.add_node("h")
        bad = {
            ("--no-such-option",): "unknown option",
            ("--size", "3"): "--size",
            ("--pair", "--role", "tx"): "exclude each other",
            ("--fault-tx", "loss=2"): "probability",
            # As imagod refuses them (an outside tester found them taken here):
            ("--mode", "stream", "--role", "tx", "--iface", "x0", "--iface-b", "x0", "--redundancy", "duplicate"): "network A's interface too",
            ("--mode", "stream", "--role", "tx", "--iface", "x0", "--iface-b", "x1", "--redundancy", "duplicate",
             "--src-ip-b", "10.0.0.1"):
                "--src-ip-b needs --encap udp",
            ("--pair", "--redundancy", "duplicate", "--failback-ms", "10"): "--failback-ms is for",
            # Options the run would not read (an outside tester found them taken silently):
            ("--mode", "stream", "--ping-timeout-us", "5"): "raw-pingpong mode only",
            ("--mode", "pingpong", "--rate", "100"): "nothing to pace",
            ("--mode", "raw", "--go-back-n"): "without the reliability protocol",
            # ... their default values too (taken before: a value compared with the default):
            ("--mode", "raw", "--mtu", "1500"): "without the reliability protocol",
            ("--mode", "pingpong", "--rate", "0"): "nothing to pace",
            ("--mode=stream", "--udp-port=47000"): "--udp-port is for --encap udp",
            ("--mode", "pingpong", "--send-copy"): "stream and rate modes on the engine only",
            ("--src-ip", "10.0.0.1"): "--src-ip is for --encap udp",
            ("--role", "tx", "--peer", "2@10.0.0.2"): "(so is --peer ID@IP)",
            ("--pmd", "af_xdp"): "give --iface",
            ("-l", "0", "--no-huge", "--", "--role", "tx", "--iface", "x0"): "say it in them",
            ("--role", "tx", "--peer", "2@02:00:00:00:00:02", "--peer-mac", "02:00:00:00:00:03"): "two addresses of one peer",
            ("--mode", "stream", "--peer-mac", "02:00:00:00:00:02"): "the peer of --pair is in this process",
            ("--peer-mac", "ff:ff:ff:ff:ff:ff"): "the peer of --pair is in this process",  # its default value too
        }
        for args, words in bad.items():
            cp = run_app(node, perf_binary, list(args))
            self.verify(cp.returncode == 2, f"{args}: exit {cp.returncode}, want 2")
            self.verify(words in cp.stderr, f"{args}: stderr {cp.stderr!r} lacks {words!r}")
            self.verify("EAL: " not in cp.stderr, f"{args}: EAL started for a bad command line")
        cp = run_app(node, perf_binary, ["--help"])
        self.verify(cp.returncode == 0 and "--msgs N" in cp.stdout and "[1000000]" in cp.stdout,
                    f"--help: exit {cp.returncode}, output {cp.stdout[:200]!r}")

    def test_the_examples_take_an_option_joined_to_its_value(self, topology: Topology) -> None:
        """
        Steps:
            Run imago-pubsub (embedded) with --count=50 --size=16-100; then with --zero-copy=1
            and with --count=.
        Verify:
            The first delivers its 50 messages (before: "unknown argument '--count=50'", exit
            2); a flag given a value, an empty value, an unknown option of the embedded
            node (after --; exit 1 before) or one of imagod's alone (--duration, ignored
            before), and --peer or --node with both (nodes 1 and 2, which ignored them) exit 2
            and say why.
        """
        node = topology.add_node("h")
        pubsub = build_dir() / "apps" / "examples" / "imago-pubsub"
        cp = run_app(node, pubsub, ["both", "--count=50", "--size=16-100", "--timeout=20"], timeout=60)
        lines = [ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")]
        self.verify(cp.returncode == 0 and lines, f"exit {cp.returncode}; stderr {cp.stderr[-400:]!r}")
        res = result_line_object(lines[-1])
        self.verify(res["msgs_delivered"] == 50 and res["lost"] == 0, f"RESULT {res}")
        for args, words in {("--zero-copy=1",): "takes no value", ("--count=",): "whole number",
                            ("--", "--pair", "--bogus"): "unknown option",  # the embedded node's
                            ("--", "--pair", "--duration", "5"): "is imagod's alone",  # ignored before
                            # both runs nodes 1 and 2 (an outside tester found these ignored):
                            ("--peer", "3"): "--peer is for pub, sub only",
                            ("--node", "1"): "--node is for pub, sub only"}.items():
            cp = run_app(node, pubsub, ["both", *args])
            self.verify(cp.returncode == 2 and words in cp.stderr, f"{args}: exit {cp.returncode}, {cp.stderr!r}")

    def test_the_examples_refuse_what_they_would_ignore_or_misread(self, topology: Topology, tmp_path: Path) -> None:
        """
        Steps:
            Run each example with what an outside tester found taken: imago-group both with
            --node (it runs nodes 1 and 2) and with --peer (it has none); a node id above
            2^32 - 1 (ids are 32-bit); --timeout and --rate in hex; --size -1; another
            example's option (imago-pubsub --wait, imago-reqresp --hold, imago-group --name);
            imago-group --order-log into a folder; imago-cp recv --out a missing folder, ''
            and /dev/null; imago-cp send a missing file and a folder.
            Each with the embedded node's command line of an outside tester (EAL args of its
            own, EAL's default log level: its start says "EAL: ...").
        Verify:
            Each exits 2 before EAL starts (no "EAL:" line), naming the option, or the file,
            and what it takes. Before: exit 0 with the option ignored; the hex taken; "not ''"
            for --size -1; imago-group's log refused only after the whole run (exit 1);
            imago-cp recv waiting to end "timed out", and send failing after EAL (exit 1).
        """
        node = topology.add_node("h")
        (tmp_path / "dir").mkdir()
        group, cp = example_path("imago-group"), example_path("imago-cp")
        pubsub, reqresp = example_path("imago-pubsub"), example_path("imago-reqresp")
        bad = [
            (group, ["both", "--node", "7"], "--node is for pub, sub, all only"),
            (group, ["both", "--node", "4294967296"], "--node takes a whole number from 1 to 4294967295, not '4294967296'"),
            (group, ["both", "--peer", "5"], "unknown argument '--peer'"),
            (group, ["both", "--name", "x"], "unknown argument '--name'"),
            (pubsub, ["sub", "--peer", "4294967296"], "--peer takes a whole number from 1 to 4294967295"),
            (reqresp, ["client", "--node", "4294967296"], "--node takes a whole number from 1 to 4294967295"),
            (cp, ["recv", "--node", "4294967296"], "--node takes a whole number from 1 to 4294967295"),
            (pubsub, ["both", "--count", "10", "--timeout", "0x10"], "--timeout takes a number from 0 to 1000000"),
            (cp, ["recv", "--timeout", "0x10"], "--timeout takes a number from 0 to 1000000"),
            (group, ["both", "--rate", "0x10"], "--rate takes a number from 0 to 1000000000"),
            (pubsub, ["both", "--size", "-1"], "--size takes B or A-B, whole numbers from 16 to 4294967295 with A <= B, not '-1'"),
            (reqresp, ["both", "--size", "-1"], "not '-1'"),
            (group, ["both", "--size", "-1"], "not '-1'"),
            (pubsub, ["both", "--wait"], "unknown argument '--wait'"),
            (reqresp, ["both", "--hold", "1"], "unknown argument '--hold'"),
            (group, ["both", "--count", "10", "--order-log", str(tmp_path / "dir")],
             "--order-log '" + str(tmp_path / "dir") + "': cannot open it for writing: Is a directory"),
            (cp, ["recv", "--out", str(tmp_path / "none")], "No such file or directory"),
            (cp, ["recv", "--out", ""], "--out '': an empty name"),
            (cp, ["recv", "--out", "/dev/null"], "--out '/dev/null': not a folder"),
            (cp, ["send", str(tmp_path / "none")], "No such file or directory"),
            (cp, ["send", str(tmp_path / "dir")], "a folder, not a regular file"),
        ]
        node_line = ["--", "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", f"{topology.prefix}-bad",
                     "-l", "0-1", "--", "--pair"]
        for program, args, words in bad:
            cp_ = run_app(node, program, [*args, "--timeout", "3", *node_line], timeout=60)
            what = f"{program.name} {args}: exit {cp_.returncode}, stderr {cp_.stderr[-300:]!r}"
            self.verify(cp_.returncode == 2 and words in cp_.stderr, what)
            self.verify("EAL: " not in cp_.stderr, f"{what}: EAL started for a bad command line")

    def test_the_examples_take_the_largest_count_they_state(self, topology: Topology) -> None:
        """
        Steps:
            imago-reqresp both and imago-pubsub both (embedded) with --count
            18446744073709551615, the largest their --help states; SIGTERM a second after READY.
        Verify:
            Each exits 0 with a RESULT of what it did (its requests answered, round-trip
            percentiles in order; its messages delivered, none lost). Before: a segmentation
            fault, from an allocation of a sample per request (a bit per message) never checked.
        """
        node = topology.add_node("h")
        for program in ("imago-reqresp", "imago-pubsub"):
            run = start_example(node, program, ExampleParams(role="both", count=2**64 - 1, timeout_s=10))
            run.wait_ready(30)
            time.sleep(1.0)
            run.proc.signal(signal.SIGTERM)
            res = run.result(timeout=15)
            self.verify(res.msgs_delivered > 0 and res.clean, f"{program}: {res}")
            if program == "imago-reqresp":
                rtt = res.rtt_us()
                self.verify(0 < rtt["p50"] <= rtt["p99"] <= rtt["p999"] <= rtt["max"], f"rtt percentiles {rtt}")

    def test_the_examples_stop_on_sighup_and_say_when_their_output_is_gone(self, topology: Topology) -> None:
        """
        Steps:
            imago-pubsub both (embedded): SIGHUP a second after READY. Then imago-pubsub,
            imago-reqresp and imago-group both --count 1000 with standard output on /dev/full.
        Verify:
            The first stops cleanly: exit 0, a clean RESULT, its runtime directory
            (/var/run/dpdk/imago-PID) gone. Each of the others runs, then exits 1 saying its
            RESULT line is lost. Before: SIGHUP killed it, leaving that directory, and a lost
            RESULT went unsaid (exit 0).
        """
        node = topology.add_node("h")
        run = start_example(node, "imago-pubsub", ExampleParams(role="both", count=2**64 - 1, timeout_s=10))
        run.wait_ready(30)
        time.sleep(1.0)
        run.proc.signal(signal.SIGHUP)
        res = run.result(timeout=15)
        self.verify(res.msgs_delivered > 0 and res.clean, f"imago-pubsub after SIGHUP: {res}")
        left = Path(f"/var/run/dpdk/imago-{run.proc.pid}")
        self.verify(not left.exists(), f"{left} left behind")
        for program in ("imago-pubsub", "imago-reqresp", "imago-group"):
            cmd = f"'{example_path(program)}' both --count 1000 --timeout 20 > /dev/full"
            cp_ = node.exec(["/bin/sh", "-c", cmd], timeout=60, check=False)
            self.verify(cp_.returncode == 1 and "the RESULT line is lost" in cp_.stderr,
                        f"{program}: exit {cp_.returncode}, stderr {cp_.stderr[-300:]!r}")

    def test_an_iface_beside_eal_args_of_ones_own_is_told_where_the_port_goes(self, topology: Topology) -> None:
        """
        Steps:
            imagod with EAL args of its own (no --vdev in them) and --iface lo after --.
        Verify:
            It does not start (exit 1) and says the port goes in those EAL args, since --iface
            makes a port only with the default ones. Before: "no port: give --pair, --iface
            NAME, ..." to one who had given --iface (an outside tester, through
            imago_attach_embedded()).
        """
        node = topology.add_node("h")
        cp_ = run_app(node, imagod_binary(), ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", f"imdts{os.getpid()}-if",
                                              "-l", "0-1", "--", "--iface", "lo", "--node-id", "1", "--peer", "2"], timeout=30)
        self.verify(cp_.returncode == 1 and "make ports only with the default EAL args" in cp_.stderr,
                    f"exit {cp_.returncode}, stderr {cp_.stderr[-300:]!r}")

    def test_imago_group_says_when_its_order_log_cannot_be_written(self, topology: Topology, tmp_path: Path) -> None:
        """
        Steps:
            imago-group both (embedded) --count 10 with --order-log /dev/full (opens, but every
            write fails), then with --order-log a file of a folder that exists.
        Verify:
            The first runs, then exits 1 naming --order-log, the file and the error (no space
            left); the second exits 0 and its log has the 11 deliveries (10 and the last).
        """
        node = topology.add_node("h")
        group = example_path("imago-group")
        cp_ = run_app(node, group, ["both", "--count", "10", "--timeout", "20", "--order-log", "/dev/full"], timeout=60)
        self.verify(cp_.returncode == 1 and "RESULT " in cp_.stdout and
                    "--order-log '/dev/full': cannot write it: No space left on device" in cp_.stderr,
                    f"exit {cp_.returncode}, stderr {cp_.stderr[-300:]!r}")
        log = tmp_path / "order.log"
        cp_ = run_app(node, group, ["both", "--count", "10", "--timeout", "20", "--order-log", str(log)], timeout=60)
        self.verify(cp_.returncode == 0, f"exit {cp_.returncode}, stderr {cp_.stderr[-300:]!r}")
        lines = log.read_text().splitlines()
        self.verify(lines == [f"1 {k}" for k in range(1, 12)], f"order log {lines}")

    def test_an_example_on_one_embedded_node_opens_towards_its_only_peer(self, topology: Topology) -> None:
        """
        Steps:
            Run imago-pubsub sub (embedded, one node on net_null, USER.md's command line
            shape: -- EAL args -- --node-id 2 --peer 1) for 2 s without --peer of its own.
        Verify:
            It opens its endpoint towards node 1, the only --peer of its node (before: "cannot
            open endpoint 'pubsub' on node 2 to node 0 (give --peer)", exit 1, an outside
            tester following USER.md).
        """
        node = topology.add_node("h")
        pubsub = build_dir() / "apps" / "examples" / "imago-pubsub"
        cp = run_app(node, pubsub, ["sub", "--count", "10", "--timeout", "2", "--", "-l", "0-1", "--no-huge",
                                    "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", f"{topology.prefix}-one",
                                    "--vdev", "net_null0", "--", "--node-id", "2", "--peer", "1"], timeout=60)
        self.verify("READY endpoint 'pubsub' node 2 -> node 1" in cp.stdout,
                    f"exit {cp.returncode}; stdout {cp.stdout[-300:]!r}; stderr {cp.stderr[-400:]!r}")

    def test_a_run_sharing_its_prefix_leaves_the_others_runtime_dir(self, topology: Topology,
                                                                    perf_binary: Path) -> None:
        """
        Steps:
            Start imago-perf --pair (6 s) with EAL args --no-shconf --file-prefix P; run a
            second, short one with the same EAL args; then let the first end.
        Verify:
            After the second exits, /var/run/dpdk/P and the first's telemetry socket are still
            there (before: the second removed the directory under the first); once the first
            exits, the directory is gone.
        """
        node = topology.add_node("h")
        prefix = f"imago-dts-shared-{os.getpid()}"
        rundir = Path("/var/run/dpdk") / prefix
        eal = ["-l", "0-1", "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", prefix, "--"]
        first = node.start([str(perf_binary), *eal, "--pair", "--duration", "6", "--msgs", "1000000000"],
                           name="perf-first")
        first.wait_for_line("READY", 30)
        cp = run_app(node, perf_binary, [*eal, "--pair", "--duration", "1", "--msgs", "1000"])
        self.verify(cp.returncode == 0, f"second: exit {cp.returncode}; {cp.stderr[-300:]!r}")
        self.verify((rundir / "dpdk_telemetry.v2").exists(), f"{rundir} lost the first's socket")
        self.verify(first.wait(30) == 0, f"first failed; last lines:\n{first.tail()}")
        self.verify(not rundir.exists(), f"{rundir} left behind by the last of its processes")

    def test_a_vdev_that_does_not_come_up_is_said_so(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            imago-perf with EAL args whose --vdev names an interface that does not exist.
        Verify:
            Exit 1 saying the --vdev given did not come up (before: "needs a port: give
            --iface NAME, --vdev DEV", to a user who gave one: an outside tester).
        """
        node = topology.add_node("h")
        cp = run_app(node, perf_binary, ["-l", "0", "--no-huge", "-m", "256", "--no-pci", "--file-prefix",
                                         f"imago-dts-novdev-{os.getpid()}", "--vdev", "net_af_packet0,iface=nosuchif0",
                                         "--", "--role", "tx", "--mode", "stream"])
        self.verify(cp.returncode == 1 and "the --vdev given did not come up" in cp.stderr,
                    f"exit {cp.returncode}; {cp.stderr[-600:]!r}")

    def test_small_mtu_and_send_window_are_taken(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            imago-perf --pair --mode stream with --mtu 576 --send-window 64 (the bottom of
            both documented ranges).
        Verify:
            All 2000 messages delivered (before: "engine settings refused ... largest message
            16777216", exit 1, for any --mtu below about 1150 or --send-window below 16384).
        """
        node = topology.add_node("h")
        cp = run_app(node, perf_binary, ["--pair", "--mode", "stream", "--msgs", "2000", "--mtu", "576",
                                         "--send-window", "64"], timeout=60)
        lines = [ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")]
        self.verify(cp.returncode == 0 and lines, f"exit {cp.returncode}; {cp.stderr[-500:]!r}")
        res = result_line_object(lines[-1])
        self.verify(res["msgs_delivered"] == 2000 and res["lost"] == 0, f"RESULT {res}")

    def test_an_interface_is_left_promiscuous_as_it_was(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            On a veth end, not promiscuous, then promiscuous (set by the operator): a short
            imago-perf run over net_af_packet each time.
        Verify:
            After each run the interface is as it was before it (before: always left
            promiscuous; a first fix turned the operator's setting off, since the port's start
            clears the flag before it was read).
        """
        a, _ = topology.add_veth(topology.add_node("pa"), topology.add_node("pb"))
        for before in ("off", "on"):
            a.node.exec(["ip", "link", "set", a.name, "promisc", before])
            a.node.exec([str(perf_binary), "--role", "rx", "--iface", a.name, "--mode", "stream", "--msgs", "10",
                         "--duration", "1"], timeout=60, check=False)
            out = a.node.exec(["ip", "-d", "link", "show", a.name]).stdout
            self.verify(f"promiscuity {0 if before == 'off' else 1} " in out, f"promisc {before} before: {out!r}")

    def test_imagod_serves_until_sigterm(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Start imagod (node 1, peer 2) on a net_null port; wait until it serves and prints
            its node counters; start a second imagod with the same file prefix; send the
            first SIGTERM.
        Verify:
            The second refuses (exit 1) and says an imagod runs with that prefix (not EAL's
            lock error and a hugepage hint); the first exits 0 within 10 s and says it
            stopped cleanly.
        """
        if not imagod_binary().exists():
            raise AssertionError(f"{imagod_binary()} missing: the build did not produce imagod")
        node = topology.add_node("d")
        eal = EalConfig(lcores="0-1", file_prefix="", vdevs=("net_null0",), shared_config=True)
        prefix = f"{topology.prefix}-d-imagod"
        proc = ImagodRun.start(node, prefix, nodes=["--node-id", "1", "--peer", "2"], eal=eal,
                               stats_period_s=0.2).proc
        proc.wait_for_line("serving 1 node(s) (ids 1)", 30, stream="stdout")
        proc.wait_for_line("node 1: msgs sent", 10, stream="stdout")
        cp = run_app(node, imagod_binary(), ["--pair", "--file-prefix", prefix], timeout=30)
        words = f"an imagod (or another DPDK primary) already runs with file prefix '{prefix}'"
        self.verify(cp.returncode == 1 and words in cp.stderr and "hugepages" not in cp.stderr,
                    f"second imagod: exit {cp.returncode}, stderr {cp.stderr[-400:]!r}")
        proc.signal(signal.SIGTERM)
        rc = proc.wait(10)
        self.verify(rc == 0, f"imagod exited {rc}")
        self.verify(any("stopped cleanly" in line for line in proc.lines("stdout")), "no clean-stop line")

    def test_imagod_without_hugepages_serves_its_nodes(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Run imagod --no-huge --pair (its own EAL defaults) for one second.
        Verify:
            It starts (no rte_mp error), says applications cannot attach, prints its node
            counters with frames exchanged between its two nodes, and exits 0 cleanly.
        """
        node = topology.add_node("nh")
        cp = run_app(node, imagod_binary(), ["--no-huge", "--pair", "--duration", "1", "--stats-period", "0.5"],
                     timeout=30)
        self.verify(cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr[-500:]}")
        self.verify("applications cannot attach" in cp.stdout, f"no word on attaching: {cp.stdout[-500:]}")
        self.verify("rte_mp" not in cp.stderr, f"rte_mp error: {cp.stderr[-500:]}")
        self.verify("node 1: msgs sent" in cp.stdout and "stopped cleanly" in cp.stdout, cp.stdout[-500:])

    def test_imagod_names_the_port_or_lcore_it_cannot_have(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Run imagod --no-huge with --iface of an interface that does not exist (beside a
            --vdev net_null0 that does), and imagod --no-huge --pair --engine-lcore 5 (EAL runs
            lcores 0-1).
        Verify:
            Each fails to start (exit 1) and says what it could not have: the interface through
            its PMD (never another port in its place), the lcore and how to give it.
        """
        node = topology.add_node("np")
        cases = {
            ("--iface", "imago-nosuch0", "--vdev", "net_null0", "--node-id", "1", "--peer", "2"):
                "--iface imago-nosuch0: net_af_packet could not open it (no such interface in this network namespace)",
            ("--pair", "--engine-lcore", "5"): "--engine-lcore 5 is not one of EAL's lcores",
        }
        for args, words in cases.items():
            cp = run_app(node, imagod_binary(), ["--no-huge", "--file-prefix", f"{topology.prefix}-np", *args],
                         timeout=30)
            self.verify(cp.returncode == 1, f"{args}: exit {cp.returncode}, want 1")
            self.verify(words in cp.stderr, f"{args}: stderr lacks {words!r}: {cp.stderr[-400:]!r}")

    def test_imagod_says_when_another_process_has_its_af_packet_group_number(self, topology: Topology) -> None:
        """
        Steps:
            In one namespace, a veth pair (ends x and y); fanout_holder.py puts sockets on y in
            the fanout groups DPDK's net_af_packet would give x in each of the next 2,000
            processes (process id XOR x's interface index: numbers are per namespace, so two
            processes on the two ends of one pair can clash by chance); run imagod --no-huge
            --iface x.
        Verify:
            It fails to start (exit 1) and names the clash and what to do (start it again),
            where DPDK says only "Invalid argument".
        """
        node = topology.add_node("fo")
        x, y = topology.add_veth(node, node)
        holder = node.start(["/usr/bin/python3", str(Path(__file__).with_name("fanout_holder.py")), x.name, y.name,
                             "2000", "60"], name="holder")
        try:
            holding = holder.wait_for_line("HOLDING", timeout=30)
            self.verify(int(holding.split()[1]) > 1000, f"the holder holds too few groups: {holding}")
            cp = run_app(node, imagod_binary(), ["--no-huge", "--iface", x.name, "--node-id", "1", "--peer", "2",
                                                 "--duration", "1"], timeout=30)
        finally:
            holder.kill()
        self.verify(cp.returncode == 1, f"exit {cp.returncode}, want 1: {cp.stderr[-400:]!r}")
        for words in ("could not set PACKET_FANOUT", "another process in this network namespace holds that number",
                      "start this process again"):
            self.verify(words in cp.stderr, f"stderr lacks {words!r}: {cp.stderr[-600:]!r}")

    def test_an_example_told_to_attach_where_no_imagod_runs_says_so(self, topology: Topology) -> None:
        """
        Steps:
            imago-pubsub sub --secondary with a file prefix no imagod runs with.
        Verify:
            It exits non-zero at once and says what that means (before: only "Input/output
            error": an outside tester).
        """
        node = topology.add_node("ex")
        cp = run_app(node, example_path("imago-pubsub"), ["sub", "--secondary", f"{topology.prefix}-none",
                                                          "--timeout", "5"], timeout=30)
        self.verify(cp.returncode != 0, f"exit 0: {cp.stderr[-400:]!r}")
        self.verify("no imagod runs with that --file-prefix" in cp.stderr, f"stderr: {cp.stderr[-400:]!r}")

    def test_interactive_prompt_runs_and_reports(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Start imago-perf -i (two nodes over net_ring) and type: set msgs 50000, set loss 0.1,
            start, show stats, wait (until the run has finished), show stats, show peers, stop, set mode
            raw-pingpong, set msgs 2000, start, stop, quit.
        Verify:
            Exit 0; two RESULT lines: the raw run sent 50000 and lost exactly its fault drops,
            the ping-pong run has round-trip percentiles; show peers names both nodes; a
            setting changed while a run exists is refused.
        """
        node = topology.add_node("i")
        wait = ["show stats", "wait", "show stats"]  # wait: until the run has finished
        cmds = ["set msgs 50000", "set loss 0.1", "start", *wait, "set size 100", "show peers", "stop",
                "set mode raw-pingpong", "set msgs 2000", "set loss 0", "start", *wait, "stop", "quit"]
        cp = run_app(node, perf_binary, ["-i", "--seed", "3"], timeout=60, commands=cmds)
        self.verify(cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr[-500:]}")
        results = results_in(cp.stdout)
        self.verify(len(results) == 2, f"{len(results)} RESULT lines, want 2")
        raw, pp = results
        self.verify(raw.mode == "raw" and raw.msgs_sent == 50000, f"raw run: {raw.mode} sent {raw.msgs_sent}")
        self.verify(raw.lost == raw.raw["faults_dropped"], f"lost {raw.lost} != drops {raw.raw['faults_dropped']}")
        self.verify(pp.mode == "raw-pingpong" and pp.raw["rtt_us"]["p50"] > 0, f"ping-pong run: {pp.raw}")
        self.verify("node A: port" in cp.stdout and "node B: port" in cp.stdout, "show peers lacks a node")
        self.verify("stop the run before changing settings" in cp.stdout, "a setting changed mid-run")
