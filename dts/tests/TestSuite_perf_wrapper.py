# SPDX-License-Identifier: BSD-3-Clause
"""The typed imago-perf wrapper: the argument vector it builds and the RESULT line it accepts.

The first tests need no root and no binary: they pin the command-line contract on the Python
side. The last one asks the real binary's ``--help`` whether it knows every option we pass.
"""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from framework.apps import EalConfig, Encap, ImagoPerf, RawParams, Result, Role
from framework.exceptions import ResultError
from framework.testsuite import TestSuite
from framework.topology import Topology

_GOOD = {
    "mode": "raw", "role": "rx", "msgs_sent": 10, "msgs_delivered": 9, "bytes_delivered": 576,
    "duration_s": 1.5, "msgs_per_s": 6.0, "gbps": 0.0, "lost": 1, "duplicated": 0,
    "reordered": 0, "corrupted": 0, "retransmits": 0, "acks_sent": 0, "nacks_sent": 0,
    "decode_rejected": 0, "port": {"ipackets": 9, "opackets": 0, "imissed": 0, "ierrors": 0},
    "extra_key": {"kept": True},
}


class TestSuitePerfWrapper(TestSuite):
    """imago-perf's command line and RESULT, as the suites see them."""

    def test_eal_argv(self) -> None:
        """EAL arguments of one af_packet node.

        Steps:
            * Build EalConfig.af_packet(lcore=1, iface="v0", file_prefix="p").

        Verify:
            * The vector is exactly the agreed one, in order.
        """
        argv = EalConfig.af_packet(lcore=1, iface="v0", file_prefix="p").argv()
        expected = ["-l", "1", "--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry",
                    "--file-prefix", "p", "--vdev=net_af_packet0,iface=v0", "--log-level=lib.*:warning"]
        self.verify(argv == expected, f"{argv} != {expected}")

    def test_raw_argv(self) -> None:
        """App arguments of --mode raw, minimal and with every option.

        Steps:
            * Build RawParams with only the required fields, then with all of them.

        Verify:
            * Optional flags appear only when set, with the agreed spelling.
            * Bad values (negative counts, loss > 1, one IP without the other, bad MAC) raise.
        """
        minimal = RawParams(role=Role.TX, msgs=5).argv()
        self.verify(
            minimal == ["--mode", "raw", "--role", "tx", "--msgs", "5", "--size", "64", "--burst", "32",
                        "--encap", "l2"],
            f"minimal argv {minimal}",
        )
        full = RawParams(
            role=Role.RX, msgs=7, size=128, burst=8, encap=Encap.UDP, rate_pps=1000, duration_s=2.5,
            idle_timeout_ms=300, stats_period_s=1, loss=0.1, seed=7,
            src_ip=ipaddress.IPv4Address("10.199.0.1"), dst_ip="10.199.0.2", peer_mac="02:00:00:00:00:01",
        ).argv()
        expected = ["--mode", "raw", "--role", "rx", "--msgs", "7", "--size", "128", "--burst", "8",
                    "--encap", "udp", "--rate", "1000", "--duration", "2.5", "--idle-timeout-ms", "300",
                    "--stats-period", "1", "--loss", "0.1", "--seed", "7", "--src-ip", "10.199.0.1",
                    "--dst-ip", "10.199.0.2", "--peer-mac", "02:00:00:00:00:01"]
        self.verify(full == expected, f"{full} != {expected}")
        for bad in (dict(msgs=0), dict(loss=1.5), dict(src_ip="10.199.0.1"), dict(peer_mac="zz"),
                    dict(rate_pps=-1)):
            with pytest.raises(ValueError):
                RawParams(**{"role": Role.TX, "msgs": 1, **bad})

    def test_result_parsing(self) -> None:
        """Only a single, last ``RESULT {json}`` line with every agreed key is accepted.

        Steps:
            * Parse stdout made of chatter plus one good RESULT line.
            * Parse stdouts where RESULT is missing, doubled, not last, not JSON, or lacks a key.

        Verify:
            * The good one gives typed fields and keeps unknown keys in ``raw``.
            * Each bad one raises ResultError.
        """
        line = "RESULT " + json.dumps(_GOOD)
        r = Result.from_stdout(["READY", "chatter", line, ""])
        self.verify(r.msgs_delivered == 9 and r.port.ipackets == 9 and r.duration_s == 1.5, f"{r}")
        self.verify(r.raw["extra_key"] == {"kept": True}, "unknown keys were dropped")
        lacking = dict(_GOOD)
        del lacking["nacks_sent"]
        bad_stdouts = [
            ["READY"],
            [line, line],
            [line, "trailing text"],
            ["RESULT {not json"],
            ["RESULT " + json.dumps(lacking)],
            ["RESULT " + json.dumps({**_GOOD, "port": {"ipackets": 1}})],
            ["RESULT " + json.dumps({**_GOOD, "lost": "many"})],
        ]
        for stdout in bad_stdouts:
            with pytest.raises(ResultError):
                Result.from_stdout(stdout)

    @pytest.mark.perf
    def test_binary_knows_our_options(self, topology: Topology, perf_binary: Path) -> None:
        """The built imago-perf documents every option the wrapper can pass.

        Steps:
            * Run ``imago-perf --help`` inside a node.

        Verify:
            * Every flag RawParams can emit appears in the help text.
        """
        node = topology.add_node("h")
        text = ImagoPerf(node, perf_binary).help_text()
        flags = ["--mode", "--role", "--msgs", "--size", "--burst", "--encap", "--rate", "--duration",
                 "--idle-timeout-ms", "--stats-period", "--loss", "--seed", "--src-ip", "--dst-ip",
                 "--peer-mac", "--auth-key"]
        missing = [f for f in flags if f not in text]
        self.verify(not missing, f"imago-perf --help lacks {missing}:\n{text}")
