# SPDX-License-Identifier: BSD-3-Clause
"""bench/compare, the side-by-side benchmark of issue 5, as a smoke run: one size, a twentieth
of the work, every transport. It checks that the command still runs end to end and writes
what it promises (CSV, Markdown table, PNG and SVG plots); it sets no threshold on speed.
"""

from __future__ import annotations

import csv
import importlib.util
import subprocess
import sys
import time

import pytest

from framework.apps import REPO_ROOT
from framework.node import LogDir
from framework.peers import Peer, PeerKind
from framework.testsuite import TestSuite

COMPARE = REPO_ROOT / "bench" / "compare"
#: The smoke form takes about 25 s here; the limit only stops a hung run.
RUN_LIMIT_S = 180
SMOKE_ARGS = ["--quick", "--sizes", "64", "--msgs-scale", "0.05"]
#: Every series bench/compare draws (bench/compare_lib/plan.py SERIES), by test.
THROUGHPUT_SERIES = {"imago-veth", "imago-memif", "imago-pair", "imago-pair-loss1", "imago-pair-loss10",
                     "tcp-veth", "zmq-tcp", "zmq-ipc", "raw-veth", "raw-memif", "raw-pair"}
RTT_SERIES = {"imago-veth", "imago-memif", "imago-pair", "tcp-veth-spin", "tcp-veth-sleep",
              "zmq-tcp-spin", "zmq-tcp-sleep", "zmq-ipc-spin", "zmq-ipc-sleep", "raw-veth",
              "raw-memif", "raw-pair"}


class TestSuiteCompare(TestSuite):
    """bench/compare --quick on one size, into a temporary directory."""

    def test_quick_smoke(self, dts_host, perf_binary, log_dir: LogDir) -> None:
        """
        Steps:
            Run ``/usr/bin/python3 bench/compare --quick --sizes 64 --msgs-scale 0.05 --out DIR``
            as a newcomer would (DIR is this test's log directory, kept if it fails).
        Verify:
            It exits 0 within the limit; stdout holds the Markdown tables (throughput, round
            trip, ratios) and names DIR; results.csv has a row for every series at 64 B, each
            ok, failed with a reason, or skipped, and at least one measured row for imago,
            kernel TCP and ZeroMQ each; measured rows have positive rates and ordered
            percentiles; latency and bandwidth plots exist as non-empty PNG and SVG files.
        """
        if importlib.util.find_spec("matplotlib") is None:
            pytest.skip("matplotlib missing: apt-get install -y python3-matplotlib")
        for kind in (PeerKind.TCP, PeerKind.ZMQ):
            reason = Peer.missing_reason(kind)
            if reason:
                pytest.skip(f"{kind.program} unavailable: {reason}")
        out = log_dir.path / "compare"
        argv = [sys.executable, str(COMPARE)] + SMOKE_ARGS + ["--out", str(out)]
        t0 = time.monotonic()
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, cwd=REPO_ROOT)
        wall = time.monotonic() - t0
        (log_dir.path / "compare.stdout").write_text(cp.stdout)
        (log_dir.path / "compare.stderr").write_text(cp.stderr)
        print(f"bench/compare smoke: {wall:.1f} s, exit {cp.returncode}")
        print(cp.stdout)
        self.verify(cp.returncode == 0, f"bench/compare exited {cp.returncode}; stderr:\n{cp.stderr[-3000:]}")

        # Expect: the Markdown table on stdout, and where the files are.
        for marker in ("### Throughput", "### Round trip", "### Ratios imago / peer",
                       "| transport · link | lcores | wait | 64 B |", "| imago · veth (af_packet) |",
                       "| kernel TCP · veth |", f"Results in {out}"):
            self.verify(marker in cp.stdout, f"stdout lacks {marker!r}")

        # Expect: a CSV row for every series, measured or with a reason.
        with open(out / "results.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        got = {(r["test"], r["series"]) for r in rows}
        want = {("throughput", s) for s in THROUGHPUT_SERIES} | {("round trip", s) for s in RTT_SERIES}
        self.verify(want <= got, f"CSV lacks rows for {sorted(want - got)}")
        self.verify(all(r["size_bytes"] == "64" for r in rows), "a row of another size than 64")
        for r in rows:
            self.verify(r["status"] in ("ok", "failed", "skipped"), f"status {r['status']!r}")
            if r["status"] != "ok":
                self.verify(bool(r["reason"]), f"{r['series']} {r['status']} without a reason")
                print(f"not measured: {r['test']} {r['series']}: {r['reason']}")
        ok = [r for r in rows if r["status"] == "ok"]
        for transport in ("imago", "kernel TCP", "ZeroMQ"):
            self.verify(any(r["transport"] == transport for r in ok), f"nothing measured for {transport}")
        for r in ok:
            self.verify(float(r["msgs_per_s"]) > 0 and int(r["msgs_delivered"]) > 0,
                        f"{r['series']}: rate {r['msgs_per_s']}, delivered {r['msgs_delivered']}")
            if r["test"] == "round trip":
                p50, p99 = float(r["rtt_p50_us"]), float(r["rtt_p99_us"])
                self.verify(0 < p50 <= p99, f"{r['series']}: p50 {p50} p99 {p99}")
            else:
                self.verify(float(r["gbps"]) > 0, f"{r['series']}: gbps {r['gbps']}")

        # Expect: both plots in both formats.
        for name in ("latency", "bandwidth"):
            png, svg = out / f"{name}.png", out / f"{name}.svg"
            self.verify(png.is_file() and png.stat().st_size > 0, f"{png} missing or empty")
            self.verify(png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG")
            self.verify(svg.is_file() and svg.stat().st_size > 0, f"{svg} missing or empty")
            self.verify("<svg" in svg.read_text(errors="replace")[:2000], f"{svg} is not an SVG")
        self.verify((out / "table.md").read_text().startswith("## imago vs"), "table.md")

    def test_multicast_smoke(self, dts_host, log_dir: LogDir) -> None:
        """
        Steps:
            Run ``bench/compare --multicast --receivers 2 --sizes 64 --msgs-scale 0.02
            --norm-rates 500 --loss 5 --out DIR`` (one sender, two receivers on a bridge, 5 %
            of the frames towards each dropped; about 20 s). Not 1 %: 20,000 messages of 64 B
            fill about 160 frames, so at 1 % neither receiver lost one in about 4 % of runs.
        Verify:
            It exits 0; the CSV has a row for imago, imago as N unicast streams and NORM
            (NORM may be missing only when norm_perf is not built), each measured with every
            message delivered to both receivers; imago's row says how many repairs it sent
            (some: frames were dropped); the table is written.
        """
        out = log_dir.path / "compare-multicast"
        argv = [sys.executable, str(COMPARE), "--multicast", "--receivers", "2", "--sizes", "64", "--msgs-scale",
                "0.02", "--norm-rates", "500", "--loss", "5", "--out", str(out)]
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_LIMIT_S, cwd=REPO_ROOT)
        (log_dir.path / "compare-multicast.stdout").write_text(cp.stdout)
        (log_dir.path / "compare-multicast.stderr").write_text(cp.stderr)
        self.verify(cp.returncode == 0, f"bench/compare --multicast exited {cp.returncode}:\n{cp.stderr[-3000:]}")
        with open(out / "results.csv", newline="", encoding="utf-8") as f:
            rows = {r["transport"]: r for r in csv.DictReader(f)}
        norm_built = (REPO_ROOT / "build" / "bench" / "peers" / "norm_perf").exists()
        if not norm_built:
            print("norm_perf is not built (no libnorm-dev): NORM's row is not checked")
        want = {"imago", "imago-unicast"} | ({"norm"} if norm_built else set())
        for t in want:
            r = rows.get(t)
            self.verify(r is not None and r["status"] == "ok", f"{t}: {r}")
            self.verify(int(r["delivered_min"]) == int(r["msgs"]) and float(r["mib_per_s"]) > 0, f"{t}: {r}")
        self.verify(float(rows["imago"]["repair_per_data"]) > 0, f"imago sent no repair at 5 % loss: {rows['imago']}")
        self.verify((out / "table.md").read_text().startswith("## Reliable multicast"), "table.md")
