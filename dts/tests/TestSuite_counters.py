# SPDX-License-Identifier: BSD-3-Clause
"""Every counter the dataplane keeps reaches the RESULT line and imagod's statistics.

An operator who sees frames rejected must be able to tell why from the output alone: each
rejection reason of the engine and of the frame decoder has its own counter there.
"""

from __future__ import annotations

from pathlib import Path

from framework.apps import imagod_binary, results_in, run_app
from framework.testsuite import TestSuite
from framework.topology import Topology

ENGINE_KEYS = ("pkts_sent", "valid_acks", "dup_received", "hellos_sent", "resets", "deaths", "discarded_msgs")
REJECT_KEYS = ("bad_crc", "stale_epoch", "wrong_token", "bad_sack", "bad_ack", "out_of_window", "bad_fragment")
LINK_KEYS = ("link_frames_in", "link_alloc_failed", "link_decode_rejected", "link_decode_short",
             "link_decode_udp_checksum")


class TestSuiteCounters(TestSuite):
    """Per-reason rejection counters in imago-perf's RESULT and imagod's statistics."""

    def test_corrupted_frames_are_counted_by_reason_in_result(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Stream 50000 messages between two nodes in one process (--pair) with 1 % of
            frames corrupted by the fault layer (seed 3); then the echo mode likewise.
        Verify:
            Every message arrives intact; each engine_* object holds every engine counter,
            a reject object with every reason, and every link_* counter; the receiver's
            bad_crc rejections are the corrupted frames it saw (more than 0); retransmits,
            acks_sent and nacks_sent are the two engines' sums.
        """
        node = topology.add_node("c")
        for mode in ("stream", "echo"):
            cp = run_app(node, perf_binary, ["--pair", "--mode", mode, "--msgs", "50000", "--corrupt", "0.01",
                                             "--seed", "3", "--quiet"], timeout=60)
            self.verify(cp.returncode == 0, f"{mode}: exit {cp.returncode}: {cp.stderr[-400:]}")
            res = results_in(cp.stdout)[-1]
            self.verify(res.lost == 0 and res.corrupted == 0, f"{mode}: lost {res.lost} corrupted {res.corrupted}")
            bad_crc = 0
            for side in ("engine_A", "engine_B"):
                eng = res.raw[side]
                missing = [k for k in ENGINE_KEYS + LINK_KEYS if k not in eng]
                missing += [k for k in REJECT_KEYS if k not in eng.get("reject", {})]
                self.verify(not missing, f"{mode} {side} lacks {missing}")
                bad_crc += eng["reject"]["bad_crc"]
            self.verify(bad_crc > 0, f"{mode}: 1 % corrupted frames and no bad_crc rejection")
            # The top-level protocol counts are both nodes' (echo once counted node A's
            # retransmissions and node B's ACKs only, an outside tester found).
            for key, per_node in (("retransmits", "msgs_retransmitted"), ("acks_sent", "ack_only_sent"),
                                  ("nacks_sent", "nacks_sent")):
                both = sum(res.raw[side][per_node] for side in ("engine_A", "engine_B"))
                self.verify(res.raw[key] == both, f"{mode}: {key} {res.raw[key]}, engines' {per_node} sum {both}")

    def test_imagod_prints_every_counter(self, topology: Topology, perf_binary: Path) -> None:
        """
        Steps:
            Run imagod --no-huge --pair for one second with statistics every half second.
        Verify:
            Each node has a "counters:" line with the engine's counters, one reject_<reason>
            per reason, the link's and the decoder's counters, and the control channel's.
        """
        node = topology.add_node("s")
        cp = run_app(node, imagod_binary(), ["--no-huge", "--pair", "--duration", "1", "--stats-period", "0.5"],
                     timeout=30)
        self.verify(cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr[-400:]}")
        for nid in (1, 2):
            lines = [ln for ln in cp.stdout.splitlines() if ln.startswith(f"node {nid} counters:")]
            self.verify(lines, f"no counters line for node {nid}")
            fields = dict(kv.split("=") for kv in lines[-1].split(":", 1)[1].split())
            want = list(ENGINE_KEYS) + [f"reject_{k}" for k in REJECT_KEYS] + list(LINK_KEYS) + ["control_bad"]
            missing = [k for k in want if k not in fields]
            self.verify(not missing, f"node {nid} lacks {missing}")
            self.verify(int(fields["hellos_sent"]) > 0, f"node {nid} sent no HELLO: {lines[-1][:200]}")
