# SPDX-License-Identifier: BSD-3-Clause
"""imago's frames captured with Debian's dpdk-dumpcap and read with tshark and imago's dissector.

imagod --pair (hugepages) enables DPDK's capture framework. Debian's dpdk-dumpcap attaches to
it as a secondary and writes a pcapng of port 0 (it sees every frame between nodes 1 and 2,
one way as sent, the other as received) while an imago-perf secondary sends a paced stream.
tshark, with tools/wireshark/imago.lua, decodes the file; what it decodes is compared with
what the engines counted over the same window (read through dpdk-telemetry.py before the
capture starts and after it stops): the frames node 1 sent, the distinct units in its DATA
frames (retransmissions appear twice on the wire, once in the count), and node 2's ACK-only
frames. Keep-alives go on while the counters are read, so each count is read on both sides
of dumpcap's start and of its stop: what was captured lies between the least and the most
the engines can have sent while it ran.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from framework.apps import ImagoPerf
from framework.imago_apps import ImagodRun
from framework.testsuite import TestSuite
from framework.topology import Topology

ROOT = Path(__file__).resolve().parents[2]
DISSECTOR = ROOT / "tools" / "wireshark" / "imago.lua"
DUMPCAP = shutil.which("dpdk-dumpcap") or "/usr/bin/dpdk-dumpcap"
TSHARK = shutil.which("tshark") or "/usr/bin/tshark"
TELEMETRY_PY = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"
READY_S = 30.0
MSGS = 20_000


def _node_counters(node, prefix: str) -> dict[int, dict]:
    cmds = "/imago/node,1\n/imago/node,2\n"
    cp = node.exec(["/usr/bin/python3", TELEMETRY_PY, "-f", prefix], timeout=30, check=False, stdin_text=cmds)
    replies = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith('{"/imago/node"')]
    assert len(replies) == 2, f"dpdk-telemetry.py: {cp.stdout} {cp.stderr}"
    return {r["/imago/node"]["node"]: r["/imago/node"] for r in replies}


class TestSuiteCapture(TestSuite):
    """dpdk-dumpcap on imagod's port, tshark with the Lua dissector, against the counters."""

    def test_capture_decodes_to_what_the_engines_counted(self, topology: Topology, perf_binary,
                                                         request: pytest.FixtureRequest) -> None:
        """
        Steps:
            imagod --pair; dpdk-dumpcap -i 0 on it; a stream of 20000 messages of 200 B at
            20000/s from node 1 to node 2 (imago-perf --attach); stop dumpcap; tshark -X
            lua_script:imago.lua -r the file -T fields.
        Verify:
            At least 1000 frames captured, every one decoded as imago (link and frame
            header); frames from node 1 = node 1's frames sent (pkts_sent) over the window;
            distinct DATA units from node 1 = node 1's messages sent; ACK-only frames from
            node 2 = node 2's ack_only_sent (each between the counts read just inside and
            just outside the capture, at most 50 apart); every record carries an endpoint tag.
        """
        node, prefix, _ = ImagodRun.for_tools(topology, "cap", request, (DUMPCAP, TSHARK, TELEMETRY_PY), READY_S)
        out = Path(f"/tmp/{prefix}.pcapng")
        request.addfinalizer(lambda: out.exists() and out.unlink())
        time.sleep(0.5)  # the handshake done: the window below holds the stream only
        before_most = _node_counters(node, prefix)  # read before the capture starts
        cap = node.start([DUMPCAP, f"--file-prefix={prefix}", "-q", "-i", "0", "-w", str(out), "-a", "duration:60"],
                         name="dumpcap")
        request.addfinalizer(lambda: cap.running and cap.kill())
        cap.wait_for_line("Capturing on", READY_S)
        before_least = _node_counters(node, prefix)  # read once it runs
        perf = ImagoPerf(node, perf_binary).start_args(
            ["--attach", prefix, "--mode", "stream", "--msgs", str(MSGS), "--size", "200", "--rate", "20000",
             "--quiet"], name="traffic")
        res = perf.result(timeout=60)
        self.verify(res.msgs_delivered == MSGS, f"{res.msgs_delivered} of {MSGS} delivered")
        time.sleep(0.5)  # the last ACKs
        after_least = _node_counters(node, prefix)  # read while it still runs
        cap.signal(signal.SIGINT)
        cap.wait(30)
        after_most = _node_counters(node, prefix)
        keys = ("pkts_sent", "msgs_sent", "ack_only_sent")
        least = {n: {k: after_least[n][k] - before_least[n][k] for k in keys} for n in (1, 2)}
        most = {n: {k: after_most[n][k] - before_most[n][k] for k in keys} for n in (1, 2)}
        print("engine counters over the window, least:", least, "most:", most)
        # The bounds are only as wide as the keep-alives of a few telemetry reads.
        self.verify(all(most[n][k] - least[n][k] <= 50 for n in (1, 2) for k in keys),
                    f"the counts moved by more than keep-alives while read: {least} {most}")

        fields = ["imago.link.type", "imago.rel.type", "imago.rel.src_node", "imago.rel.records", "imago.rec.seq",
                  "imago.msg.tag"]
        cp = node.exec([TSHARK, "-X", f"lua_script:{DISSECTOR}", "-r", str(out), "-T", "fields", "-E", "separator=;",
                        "-E", "occurrence=a", "-E", "aggregator=,"] + sum((["-e", x] for x in fields), []),
                       timeout=120, check=False)
        self.verify(cp.returncode == 0, f"tshark exited {cp.returncode}: {cp.stderr[-2000:]}")
        rows = [l.split(";") for l in cp.stdout.splitlines()]
        print(f"{len(rows)} frames; first: {rows[:3]}")
        self.verify(len(rows) >= 1000, f"only {len(rows)} frames captured")
        self.verify(all(r[0] == "2" and r[1] for r in rows), "a frame not decoded as an imago reliability frame")
        from_1 = [r for r in rows if r[2] == "1"]
        kinds = Counter((r[2], r[1]) for r in rows)
        units = {int(s) for r in from_1 if r[1] == "3" and r[4] for s in r[4].split(",")}
        tags = [t for r in from_1 if r[1] == "3" for t in r[5].split(",") if t]
        print("frames by (node, type):", dict(kinds), "distinct units from node 1:", len(units))
        def within(got: int, n: int, k: str) -> bool:
            return least[n][k] <= got <= most[n][k]

        self.verify(within(len(from_1), 1, "pkts_sent"),
                    f"{len(from_1)} frames from node 1 captured, its engine sent {least[1]['pkts_sent']} to "
                    f"{most[1]['pkts_sent']}")
        self.verify(within(len(units), 1, "msgs_sent"),
                    f"{len(units)} distinct units from node 1, its engine sent {least[1]['msgs_sent']} to "
                    f"{most[1]['msgs_sent']} messages")
        self.verify(within(kinds[("2", "4")], 2, "ack_only_sent"),
                    f"{kinds[('2', '4')]} ACK frames from node 2, its engine sent {least[2]['ack_only_sent']} to "
                    f"{most[2]['ack_only_sent']}")
        self.verify(len(tags) >= MSGS, f"{len(tags)} records with an endpoint tag, {MSGS} messages")
