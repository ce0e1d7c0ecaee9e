# SPDX-License-Identifier: BSD-3-Clause
"""What bench/compare measures: the series (one line of a plot, one row of a table) and the
cases (one series at one message size).

A series is a transport on a link with one traffic pattern and one wait mode:

* ``imago-*``: imago's reliable engine (imago-perf ``stream`` / ``pingpong``);
* ``raw-*``: the link's own limit, no reliability (imago-perf ``raw`` / ``raw-pingpong``),
  only for sizes that fit one frame;
* ``tcp-*``: kernel TCP, TCP_NODELAY, length-prefixed (tcp_perf);
* ``zmq-*``: ZeroMQ PUSH/PULL (throughput) and REQ/REP (round trips) (zmq_perf).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

THROUGHPUT = "throughput"
RTT = "round trip"

#: Message sizes of the full run (imago-perf's --size is at most 65535).
FULL_SIZES = (16, 64, 256, 1024, 4096, 16384, 65000)
QUICK_SIZES = (64, 1024, 16384)
#: Raw modes carry one message per frame: above this it does not fit a 1500-byte MTU.
RAW_MAX_SIZE = 1472

#: Where each side ran: the same words go to the table, the CSV and the plots.
PLACE_PROCS = "tx lcore 0, rx lcore 1 (one process each, busy-poll)"
PLACE_PAIR = "one process: sender lcore 1, receiver lcore 0 (main), busy-poll"
PLACE_PEER = "not pinned (kernel scheduler, 2 cores)"
PLACE_API = "one application thread, lcore 0 (both ends); engines lcore 1; busy-poll"
PLACE_RTC = "one thread, lcore 0: the application and both engines (run-to-completion), busy-poll"
PLACE_IMAGOD = ("imagod --pair: engines lcore 1; imago-perf its secondary, one application thread "
                "(both ends, not pinned); busy-poll")


@dataclass(frozen=True)
class Series:
    """One line of a plot / row of a table.

    Attributes:
        key: short id, also in the CSV (``imago-veth``, ``tcp-veth-spin``).
        label: what a reader sees.
        family: imago | raw | tcp | zmq.
        link: veth | veth-xdp (a second veth pair, MTU 3000, through net_af_xdp) | memif | ring | ipc.
        test: THROUGHPUT or RTT.
        pattern: what the program ran (imago-perf mode, or the peer's socket pattern).
        wait: spin (busy-poll) or sleep (blocking calls).
        placement: which cores ran which side.
    """

    key: str
    label: str
    family: str
    link: str
    test: str
    pattern: str
    wait: str
    placement: str

    @property
    def transport(self) -> str:
        return {"imago": "imago", "raw": "link limit (raw, no reliability)", "tcp": "kernel TCP",
                "zmq": "ZeroMQ"}[self.family]


def _s(key, label, family, link, test, pattern, wait, placement) -> Series:
    return Series(key, label, family, link, test, pattern, wait, placement)


#: Every series, in table order.
SERIES: tuple[Series, ...] = (
    # one-way throughput
    _s("imago-veth", "imago · veth (af_packet)", "imago", "veth", THROUGHPUT, "stream", "spin", PLACE_PROCS),
    _s("imago-xdp", "imago · veth (af_xdp)", "imago", "veth-xdp", THROUGHPUT, "stream", "spin", PLACE_PROCS),
    _s("imago-memif", "imago · memif", "imago", "memif", THROUGHPUT, "stream", "spin", PLACE_PROCS),
    _s("imago-pair", "imago · net_ring --pair", "imago", "ring", THROUGHPUT, "stream", "spin", PLACE_PAIR),
    _s("imago-pair-loss1", "imago · net_ring --pair · 1 % loss", "imago", "ring", THROUGHPUT, "stream", "spin",
       PLACE_PAIR),
    _s("imago-pair-loss10", "imago · net_ring --pair · 10 % loss", "imago", "ring", THROUGHPUT, "stream", "spin",
       PLACE_PAIR),
    _s("imago-api-pair", "imago.h, embedded · net_ring --pair", "imago", "ring", THROUGHPUT, "stream", "spin", PLACE_API),
    _s("imago-api-imagod", "imago.h, imagod secondary · net_ring", "imago", "ring", THROUGHPUT, "stream", "spin",
       PLACE_IMAGOD),
    _s("imago-api-rtc", "imago.h, run-to-completion · net_ring", "imago", "ring", THROUGHPUT, "stream", "spin",
       PLACE_RTC),
    _s("tcp-veth", "kernel TCP · veth", "tcp", "veth", THROUGHPUT, "stream", "sleep", PLACE_PEER),
    _s("zmq-tcp", "ZeroMQ PUSH/PULL · tcp:// veth", "zmq", "veth", THROUGHPUT, "PUSH/PULL", "sleep", PLACE_PEER),
    _s("zmq-ipc", "ZeroMQ PUSH/PULL · ipc://", "zmq", "ipc", THROUGHPUT, "PUSH/PULL", "sleep", PLACE_PEER),
    _s("raw-veth", "link limit (raw) · veth (af_packet)", "raw", "veth", THROUGHPUT, "raw", "spin", PLACE_PROCS),
    _s("raw-xdp", "link limit (raw) · veth (af_xdp)", "raw", "veth-xdp", THROUGHPUT, "raw", "spin", PLACE_PROCS),
    _s("raw-memif", "link limit (raw) · memif", "raw", "memif", THROUGHPUT, "raw", "spin", PLACE_PROCS),
    _s("raw-pair", "link limit (raw) · net_ring --pair", "raw", "ring", THROUGHPUT, "raw", "spin", PLACE_PAIR),
    # round trips, one message outstanding
    _s("imago-veth", "imago · veth (af_packet)", "imago", "veth", RTT, "pingpong", "spin", PLACE_PROCS),
    _s("imago-xdp", "imago · veth (af_xdp)", "imago", "veth-xdp", RTT, "pingpong", "spin", PLACE_PROCS),
    _s("imago-memif", "imago · memif", "imago", "memif", RTT, "pingpong", "spin", PLACE_PROCS),
    _s("imago-pair", "imago · net_ring --pair", "imago", "ring", RTT, "pingpong", "spin", PLACE_PAIR),
    _s("imago-api-pair", "imago.h, embedded · net_ring --pair", "imago", "ring", RTT, "pingpong", "spin", PLACE_API),
    _s("imago-api-imagod", "imago.h, imagod secondary · net_ring", "imago", "ring", RTT, "pingpong", "spin",
       PLACE_IMAGOD),
    _s("imago-api-rtc", "imago.h, run-to-completion · net_ring", "imago", "ring", RTT, "pingpong", "spin", PLACE_RTC),
    _s("tcp-veth-spin", "kernel TCP · veth · spin", "tcp", "veth", RTT, "pingpong", "spin", PLACE_PEER),
    _s("tcp-veth-sleep", "kernel TCP · veth · blocking", "tcp", "veth", RTT, "pingpong", "sleep", PLACE_PEER),
    _s("zmq-tcp-spin", "ZeroMQ REQ/REP · tcp:// veth · spin", "zmq", "veth", RTT, "REQ/REP", "spin", PLACE_PEER),
    _s("zmq-tcp-sleep", "ZeroMQ REQ/REP · tcp:// veth · blocking", "zmq", "veth", RTT, "REQ/REP", "sleep", PLACE_PEER),
    _s("zmq-ipc-spin", "ZeroMQ REQ/REP · ipc:// · spin", "zmq", "ipc", RTT, "REQ/REP", "spin", PLACE_PEER),
    _s("zmq-ipc-sleep", "ZeroMQ REQ/REP · ipc:// · blocking", "zmq", "ipc", RTT, "REQ/REP", "sleep", PLACE_PEER),
    _s("raw-veth", "link limit (raw) · veth (af_packet)", "raw", "veth", RTT, "raw-pingpong", "spin", PLACE_PROCS),
    _s("raw-xdp", "link limit (raw) · veth (af_xdp)", "raw", "veth-xdp", RTT, "raw-pingpong", "spin", PLACE_PROCS),
    _s("raw-memif", "link limit (raw) · memif", "raw", "memif", RTT, "raw-pingpong", "spin", PLACE_PROCS),
    _s("raw-pair", "link limit (raw) · net_ring --pair", "raw", "ring", RTT, "raw-pingpong", "spin", PLACE_PAIR),
)

#: Ratios of the table: (test, metric, imago series key, peer series key). For throughput
#: a ratio above 1 favours imago; for round trips one below 1 does.
RATIOS: tuple[tuple[str, str, str, str], ...] = (
    (THROUGHPUT, "msgs_per_s", "imago-veth", "tcp-veth"),
    (THROUGHPUT, "msgs_per_s", "imago-veth", "zmq-tcp"),
    (THROUGHPUT, "msgs_per_s", "imago-memif", "zmq-ipc"),
    (THROUGHPUT, "msgs_per_s", "imago-pair", "zmq-ipc"),
    (THROUGHPUT, "msgs_per_s", "imago-pair-loss1", "imago-pair"),
    (THROUGHPUT, "msgs_per_s", "imago-pair-loss10", "imago-pair"),
    (THROUGHPUT, "msgs_per_s", "imago-api-pair", "imago-pair"),
    (THROUGHPUT, "msgs_per_s", "imago-api-imagod", "imago-pair"),
    (THROUGHPUT, "msgs_per_s", "imago-api-rtc", "imago-pair"),
    (THROUGHPUT, "msgs_per_s", "imago-api-pair", "zmq-ipc"),
    (THROUGHPUT, "msgs_per_s", "imago-veth", "raw-veth"),
    (THROUGHPUT, "msgs_per_s", "imago-xdp", "imago-veth"),
    (THROUGHPUT, "msgs_per_s", "imago-xdp", "raw-xdp"),
    (THROUGHPUT, "msgs_per_s", "imago-memif", "raw-memif"),
    (THROUGHPUT, "msgs_per_s", "imago-pair", "raw-pair"),
    (RTT, "rtt_p50_us", "imago-api-pair", "imago-pair"),
    (RTT, "rtt_p50_us", "imago-api-imagod", "imago-pair"),
    (RTT, "rtt_p50_us", "imago-api-rtc", "imago-pair"),
    (RTT, "rtt_p50_us", "imago-api-pair", "zmq-ipc-spin"),
    (RTT, "rtt_p50_us", "imago-xdp", "imago-veth"),
    (RTT, "rtt_p50_us", "imago-veth", "tcp-veth-spin"),
    (RTT, "rtt_p50_us", "imago-veth", "tcp-veth-sleep"),
    (RTT, "rtt_p50_us", "imago-veth", "zmq-tcp-spin"),
    (RTT, "rtt_p50_us", "imago-veth", "zmq-tcp-sleep"),
    (RTT, "rtt_p50_us", "imago-memif", "zmq-ipc-spin"),
    (RTT, "rtt_p50_us", "imago-memif", "zmq-ipc-sleep"),
    (RTT, "rtt_p99_us", "imago-veth", "tcp-veth-spin"),
    (RTT, "rtt_p99_us", "imago-veth", "tcp-veth-sleep"),
    (RTT, "rtt_p99_us", "imago-veth", "zmq-tcp-spin"),
    (RTT, "rtt_p99_us", "imago-memif", "zmq-ipc-spin"),
)


@dataclass(frozen=True)
class Budget:
    """How much work one case may do.

    Attributes:
        seconds: time cap of one measurement (the sender stops after it).
        msgs_scale: multiplies message counts (and the time cap) of every case.
    """

    seconds: float
    msgs_scale: float = 1.0

    @property
    def cap_s(self) -> float:
        """The time cap after scaling (never below half a second)."""
        return max(0.5, self.seconds * min(1.0, self.msgs_scale))

    def msgs(self, test: str, size: int) -> int:
        """Messages (or round trips) to ask for: enough to fill the time cap at 10 M msg/s or
        40 Gbit/s (one-way), or at 100 k round trips/s, so the cap usually ends the run."""
        if test == THROUGHPUT:
            base = self.seconds * min(10e6, 5e9 / size)
        else:
            base = self.seconds * 100e3
        return max(50, int(math.ceil(base * self.msgs_scale)))


@dataclass(frozen=True)
class Case:
    """One measurement: @p series at @p size."""

    series: Series
    size: int
    msgs: int
    cap_s: float

    @property
    def skip_reason(self) -> str | None:
        if self.series.family == "raw" and self.size > RAW_MAX_SIZE:
            return f"raw modes carry one message per frame; {self.size} B does not fit a 1500-byte MTU"
        return None


def build_plan(sizes: list[int], budget: Budget, only: list[str] | None = None) -> list[Case]:
    """Cases by size, then in SERIES order; @p only keeps series whose key starts with one of
    its words (e.g. ``imago``, ``tcp``, ``zmq-ipc``)."""
    cases = []
    for size in sizes:
        for s in SERIES:
            if only and not any(s.key.startswith(w) for w in only):
                continue
            cases.append(Case(s, size, budget.msgs(s.test, size), budget.cap_s))
    return cases
