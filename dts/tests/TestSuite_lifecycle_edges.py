# SPDX-License-Identifier: BSD-3-Clause
"""imagod and imago-perf at the edges: the signals that end them, a standard output that goes
away, files that are not what they should be, and command lines that say two things at once.

A DPDK user expects a program that owns EAL to release it (its runtime directory and hugepage
files) however it is told to stop, a written result never to be lost without a word, an input
file never to hold the start for ever, and a command line to be refused, with the option, the
value and what it takes, rather than taken with one of two settings silently dropped. The
cases come from an outside tester's findings; each failed before its fix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from framework import host
from framework.apps import ImagoPerf, imagod_binary, result_line_object, run_app
from framework.imago_apps import (HUGEPAGE_DIR, ImagodRun, cleanup_stale_hugepages, example_path,
                                  examples_missing_reason, hugepages_missing_reason)
from framework.node import Node
from framework.testsuite import TestSuite, require
from framework.topology import DPDK_RUNTIME_DIR, Topology


def _perf_eal(prefix: str) -> list[str]:
    """imago-perf's EAL args of its own (the tester's): no hugepages, file prefix @p prefix."""
    return ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", prefix, "-l", "0-1", "--"]


def _left_behind(prefix: str) -> list[str]:
    """What a process with EAL prefix @p prefix left: its runtime directory, its hugepage files."""
    return [str(p) for p in [DPDK_RUNTIME_DIR / prefix, *HUGEPAGE_DIR.glob(f"{prefix}map_*")] if p.exists()]


def _run_closing_stdout(node: Node, argv: list[str], stderr_path: Path, timeout: float) -> tuple[int, str]:
    """Run @p argv in @p node with its stdout a pipe closed after the first line (as ``| head
    -1``) and its stderr in @p stderr_path. @return its exit status and its stderr."""
    with open(stderr_path, "w") as err:
        # subprocess restores SIGPIPE's default action in the child: the app must see to it.
        p = subprocess.Popen(host.netns_exec_argv(node.netns, argv), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=err)
        try:
            first = p.stdout.readline()
            p.stdout.close()
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError(f"{argv[0]} still ran {timeout} s after its stdout closed") from None
    text = stderr_path.read_text(errors="replace")
    print(f"{Path(argv[0]).name}: first line {first!r}; exit {rc}; stderr {text[-600:]!r}")
    return rc, text


class TestSuiteLifecycleEdges(TestSuite):
    """Signals, a closed stdout, odd files and double settings, for imagod and imago-perf."""

    def test_a_duration_or_period_beyond_ten_years_is_refused(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            imago-perf --mode stream --msgs 2000 with --duration 9000000000, 1e10, 1e19, 1e308,
            2^63-1, 2^64-1, 2^64 and 315360001 (the tester's values, and the first beyond the
            cap); --stats-period, --idle-timeout-ms and --ping-timeout-us beyond theirs; then a
            run with --duration and --stats-period at the cap, 315360000.
        Verify:
            Each value beyond its cap exits 2 before EAL starts, naming the option, the value
            and the range (before: a --duration above about 8e9 s overflowed into a deadline
            already past, and the run ended at once: exit 0, nothing delivered, "ended":
            "duration"); at the cap the run delivers all 2000 and ends done.
        """
        node = topology.add_node("cap")
        base = ["--mode", "stream", "--msgs", "2000", "--quiet"]
        for v in ("9000000000", "1e10", "1e19", "1e308", str(2**63 - 1), str(2**64 - 1), str(2**64), "315360001"):
            cp = run_app(node, perf_binary, [*base, "--duration", v], timeout=30)
            self.verify(cp.returncode == 2, f"--duration {v}: exit {cp.returncode}, want 2; {cp.stdout[-300:]!r}")
            self.verify(f"bad value '{v}' for --duration" in cp.stderr and "at most 315360000" in cp.stderr,
                        f"--duration {v}: {cp.stderr!r}")
            self.verify("EAL: " not in cp.stderr, f"--duration {v}: EAL started")
        for args in (["--stats-period", "1e19"], ["--idle-timeout-ms", "4294967295"],
                     ["--mode", "raw-pingpong", "--ping-timeout-us", "18446744073709551615"]):
            cp = run_app(node, perf_binary, ["--msgs", "2000", *args], timeout=30)
            self.verify(cp.returncode == 2 and f"bad value '{args[-1]}' for {args[-2]}" in cp.stderr,
                        f"{args}: exit {cp.returncode}, {cp.stderr!r}")
        cp = run_app(node, perf_binary, [*base, "--duration", "315360000", "--stats-period", "315360000"], timeout=60)
        lines = [ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")]
        self.verify(cp.returncode == 0 and lines, f"at the cap: exit {cp.returncode}; {cp.stderr[-400:]!r}")
        res = result_line_object(lines[-1])
        self.verify(res["msgs_delivered"] == 2000 and res["ended"] == "done", f"at the cap: {res}")

    def test_sighup_stops_imagod_and_imago_perf_cleanly(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Start imagod --pair on hugepages; once it serves, send it SIGHUP. Start imago-perf
            --pair --mode stream (EAL args of its own, a file prefix of ours) with more
            messages than it can send in the test; once READY, send it SIGHUP.
        Verify:
            imagod exits 0 and says it stopped cleanly; imago-perf exits 0 with a RESULT that
            ended "signal"; neither leaves its runtime directory or hugepage files behind
            (before: both killed, exit 129, /var/run/dpdk/PREFIX and PREFIXmap_* left).
        """
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node("hup")
        prefix = f"{topology.prefix}-hupd"
        d = ImagodRun.start(node, prefix, stats_period_s=0, name="imagod-hup")
        d.proc.wait_for_line("serving 2 node(s)", 30, stream="stdout")
        d.proc.signal(signal.SIGHUP)
        rc = d.proc.wait(30)
        self.verify(rc == 0, f"imagod exited {rc}; last lines:\n{d.proc.tail()}")
        self.verify(any("stopped cleanly" in ln for ln in d.proc.lines("stdout")), "imagod: no clean-stop line")
        self.verify(not _left_behind(prefix), f"imagod left {_left_behind(prefix)}")
        pprefix = f"{topology.prefix}-hupp"
        run = ImagoPerf(node, perf_binary).start_args(
            [*_perf_eal(pprefix), "--pair", "--mode", "stream", "--msgs", "2000000000", "--quiet"], name="perf-hup")
        run.wait_ready(30)
        run.proc.signal(signal.SIGHUP)
        res = run.result(timeout=30)
        self.verify(res.raw["ended"] == "signal", f"imago-perf ended {res.raw['ended']}")
        self.verify(not _left_behind(pprefix), f"imago-perf left {_left_behind(pprefix)}")

    def test_a_closed_standard_output_stops_nothing_uncleanly(self, topology: Topology, perf_binary: Path,
                                                              log_dir) -> None:
        """
        Steps:
            imagod --pair (hugepages) --stats-period 0.2 --duration 3, its stdout a pipe closed
            after the first line (as `| head -1`); imago-perf --mode stream --msgs 200000
            (EAL args of its own) the same way.
        Verify:
            imagod goes on serving to its --duration, says once on stderr that standard output
            cannot be written (Broken pipe), stops cleanly, exits 0 and leaves nothing behind;
            imago-perf runs to its end, cleans up, says on stderr that the RESULT line is lost
            and exits 1 (before: both killed by SIGPIPE, 141 in a shell, no word, the runtime
            directory and hugepage files left).
        """
        cleanup_stale_hugepages()
        require(hugepages_missing_reason())
        node = topology.add_node("pipe")
        prefix = f"{topology.prefix}-piped"
        started = time.monotonic()
        rc, err = _run_closing_stdout(node, [str(imagod_binary()), "--pair", "--file-prefix", prefix,
                                             "--stats-period", "0.2", "--duration", "3"],
                                      log_dir.new_log("imagod-stderr"), 30)
        self.verify(rc == 0, f"imagod exited {rc}, want 0: a closed stdout is no reason to die")
        self.verify(time.monotonic() - started >= 2.5, "imagod ended before its --duration")
        self.verify("standard output cannot be written (Broken pipe)" in err and "still serving" in err,
                    f"imagod did not say its stdout is gone: {err[-400:]!r}")
        self.verify("imagod: stopped cleanly" in err, f"no clean stop said on stderr: {err[-400:]!r}")
        self.verify(not _left_behind(prefix), f"imagod left {_left_behind(prefix)}")
        pprefix = f"{topology.prefix}-pipep"
        rc, err = _run_closing_stdout(node, [str(perf_binary), *_perf_eal(pprefix), "--mode", "stream", "--msgs",
                                             "200000"], log_dir.new_log("perf-stderr"), 60)
        self.verify(rc == 1, f"imago-perf exited {rc}, want 1 (its RESULT could not be written)")
        self.verify("the RESULT line is lost" in err, f"imago-perf did not say so: {err[-400:]!r}")
        self.verify(not _left_behind(pprefix), f"imago-perf left {_left_behind(pprefix)}")

    def test_a_file_imago_perf_cannot_write_fails_the_run(self, topology: Topology, perf_binary: Path,
                                                          tmp_path: Path) -> None:
        """
        Steps:
            imago-perf pingpong with --hist-csv /dev/full; rate mode with --arrivals
            /dev/full; pingpong with --hist-csv a FIFO no process reads; the same with a
            reader on the FIFO.
        Verify:
            /dev/full: RESULT printed last, exit 1, "--hist-csv /dev/full: not written: No
            space left on device" (--arrivals likewise; before: exit 0, the data lost without
            a word); the FIFO without a reader: exit 1 at the end, "a FIFO no process reads"
            (before: held at start for ever); with a reader: exit 0, the reader got the CSV.
        """
        node = topology.add_node("out")
        cases = {("--mode", "pingpong", "--msgs", "200", "--hist-csv", "/dev/full"): "--hist-csv /dev/full",
                 ("--mode", "rate", "--rate", "100000", "--msgs", "2000", "--arrivals", "/dev/full"):
                     "--arrivals /dev/full"}
        for args, name in cases.items():
            cp = run_app(node, perf_binary, [*args, "--quiet"], timeout=60)
            self.verify(cp.returncode == 1, f"{name}: exit {cp.returncode}, want 1; {cp.stderr[-300:]!r}")
            self.verify(f"{name}: not written: No space left on device" in cp.stderr, f"{name}: {cp.stderr!r}")
            self.verify(cp.stdout.splitlines()[-1].startswith("RESULT "), f"{name}: RESULT not last")
        fifo = tmp_path / "hist.fifo"
        os.mkfifo(fifo)
        hist = ["--mode", "pingpong", "--msgs", "200", "--quiet", "--hist-csv", str(fifo)]
        cp = run_app(node, perf_binary, hist, timeout=30)
        self.verify(cp.returncode == 1 and "a FIFO no process reads" in cp.stderr,
                    f"a FIFO without a reader: exit {cp.returncode}, {cp.stderr[-300:]!r}")
        reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
        try:
            cp = run_app(node, perf_binary, hist, timeout=30)
            got = reader.communicate(timeout=10)[0]
        finally:
            reader.kill()
        self.verify(cp.returncode == 0, f"a FIFO with a reader: exit {cp.returncode}, {cp.stderr[-300:]!r}")
        self.verify(got.startswith("lower,upper,count\n"), f"the reader got {got[:100]!r}")

    def test_an_input_that_is_no_regular_file_is_refused(self, topology: Topology, perf_binary: Path,
                                                         tmp_path: Path) -> None:
        """
        Steps:
            imago-perf --auth-key with a FIFO, a directory and /dev/zero; imagod --no-huge
            --topology with a FIFO.
        Verify:
            Each exits 2 at once saying the file is not a regular file (before: a FIFO held
            the start for ever; the directory was "cannot read key file" without a reason;
            /dev/zero got the advice "head -c 32 /dev/urandom > /dev/zero").
        """
        node = topology.add_node("in")
        fifo = tmp_path / "in.fifo"
        os.mkfifo(fifo)
        for path in (str(fifo), str(tmp_path), "/dev/zero"):
            cp = run_app(node, perf_binary, ["--auth-key", path], timeout=15)
            self.verify(cp.returncode == 2 and f"key file {path} is not a regular file" in cp.stderr,
                        f"--auth-key {path}: exit {cp.returncode}, {cp.stderr[-300:]!r}")
            self.verify("make one with" not in cp.stderr, f"--auth-key {path}: {cp.stderr!r}")
        cp = run_app(node, imagod_binary(), ["--no-huge", "--node-id", "1", "--topology", str(fifo)], timeout=15)
        self.verify(cp.returncode == 2 and f"--topology {fifo}: not a regular file" in cp.stderr,
                    f"--topology FIFO: exit {cp.returncode}, {cp.stderr[-300:]!r}")

    def test_two_values_for_one_setting_are_refused_and_a_bad_value_gets_its_range(self, topology: Topology,
                                                                                    perf_binary: Path) -> None:
        """
        Steps:
            imagod --no-huge with --loss and --fault-rx loss=, --pmd af_xdp with --pair,
            --file-prefix twice, --engine-lcore 2147483648, --pool-max 0; imago-perf with
            --loss and --fault-tx, --seed and a spec's seed=, --msgs twice, --ring-size 3.
        Verify:
            Each exits 2 before EAL starts, saying which options clash, or naming the option,
            the value and the range (before: the last value taken without a word, --pmd
            ignored, --engine-lcore refused only once EAL had started, exit 1, and "bad value"
            without the range).
        """
        node = topology.add_node("two")
        imagod, perf = imagod_binary(), perf_binary
        cases = [
            (imagod, ["--pair", "--loss", "0.5", "--fault-rx", "loss=0.1"], "--loss P is --fault-rx loss=P"),
            (imagod, ["--pair", "--pmd", "af_xdp"], "--pmd chooses what opens --iface"),
            (imagod, ["--pair", "--file-prefix", "A", "--file-prefix", "B"], "--file-prefix given twice"),
            (imagod, ["--pair", "--engine-lcore", "2147483648"],
             "bad value '2147483648' for --engine-lcore N: lcore running the engines, 0.."),
            (imagod, ["--pair", "--pool-max", "0"],
             "bad value '0' for --pool-max BYTES: largest message in the small pool tier, 49..2048"),
            (perf, ["--loss", "0.1", "--fault-tx", "loss=0.2"], "--loss is --fault-tx loss="),
            (perf, ["--seed", "3", "--fault-rx", "loss=0.1,seed=4"], "both set the faults' seed"),
            (perf, ["--msgs", "5", "--msgs", "6"], "--msgs given twice"),
            (perf, ["--ring-size", "3"],
             "bad value '3' for --ring-size N: slots per net_ring direction of --pair, a power of two, 64..1048576"),
        ]
        for binary, args, words in cases:
            cp = run_app(node, binary, (["--no-huge"] if binary == imagod else []) + args, timeout=30)
            self.verify(cp.returncode == 2, f"{binary.name} {args}: exit {cp.returncode}, want 2")
            self.verify(words in cp.stderr, f"{binary.name} {args}: stderr {cp.stderr!r} lacks {words!r}")
            self.verify("EAL: " not in cp.stderr, f"{binary.name} {args}: EAL started for a bad command line")

    def test_a_peer_that_takes_smaller_messages_is_sent_none_larger(self, topology: Topology) -> None:
        """
        Steps:
            Two namespaces on a veth; imago-pubsub pub on node 1 (--max-message 1048576)
            sending 50 messages of 100,000 bytes to imago-pubsub sub on node 2 (the default
            --max-message, 65536), both embedded, each driving its node.
        Verify:
            The publisher stops with exit 1 once the subscriber's endpoint is ready, naming the
            65,536 bytes the peer takes (before: the publisher exited 0 with every message
            confirmed, the subscriber's node dropped each once whole, reject_too_large, and
            nothing arrived: an outside tester).
        """
        require(examples_missing_reason())
        a_if, b_if = topology.add_veth(topology.add_node("xa"), topology.add_node("xb"), mtu=1500)
        prog = str(example_path("imago-pubsub"))

        def node_args(port, node_id: int, peer_port, peer: int, extra: list[str]) -> list[str]:
            return ["--", "--iface", port.name, "--node-id", str(node_id), "--peer", f"{peer}@{peer_port.mac}",
                    "--run-to-completion", *extra]

        sub = b_if.node.start([prog, "sub", "--node", "2", "--peer", "1", "--count", "50", "--size", "64",
                               "--timeout", "6", *node_args(b_if, 2, a_if, 1, [])], name="xsub")
        sub.wait_for_line("READY", 30)
        pub = a_if.node.start([prog, "pub", "--node", "1", "--peer", "2", "--count", "50", "--size", "100000",
                               "--timeout", "6", *node_args(a_if, 1, b_if, 2, ["--max-message", "1048576"])],
                              name="xpub")
        rc = pub.wait(60)
        err = "\n".join(pub.lines("stderr"))
        print("pub exit", rc, err[-600:])
        self.verify(rc == 1 and "100000 bytes is above the largest this endpoint takes, 65536 bytes" in err,
                    f"pub exit {rc}: {err[-600:]!r}")
        sub.wait(60)
