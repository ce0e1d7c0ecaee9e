# SPDX-License-Identifier: BSD-3-Clause
"""ICMP echo between nodes, without the ``ping`` binary (iputils is not installed here).

:func:`ping` runs this file inside the source node's namespace (``ip netns exec NS python3
ping.py DST``); the ``__main__`` part uses only the standard library and a raw ICMP socket.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class PingResult:
    sent: int
    received: int
    output: str

    @property
    def ok(self) -> bool:
        return self.sent > 0 and self.received == self.sent


def ping(node, dst: str, *, count: int = 3, timeout_s: float = 1.0) -> PingResult:
    """Send @p count echo requests from @p node (a framework.node.Node) to @p dst."""
    cp = node.exec(
        [sys.executable, os.path.abspath(__file__), str(dst), str(count), str(timeout_s)],
        timeout=count * timeout_s + 10,
        check=False,
    )
    sent = received = 0
    for line in cp.stdout.splitlines():
        if line.startswith("PING_SUMMARY"):
            _, sent_s, received_s = line.split()
            sent, received = int(sent_s), int(received_s)
    return PingResult(sent, received, (cp.stdout + cp.stderr).strip())


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def _main(argv: list[str]) -> int:
    dst, count, timeout_s = argv[0], int(argv[1]), float(argv[2])
    ident = os.getpid() & 0xFFFF
    received = 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        for seq in range(1, count + 1):
            payload = b"imago-dts" + struct.pack("!d", time.time())
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            pkt = struct.pack("!BBHHH", 8, 0, _checksum(hdr + payload), ident, seq) + payload
            t0 = time.monotonic()
            s.sendto(pkt, (dst, 0))
            deadline = t0 + timeout_s
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    print(f"seq={seq} timeout")
                    break
                r, _, _ = select.select([s], [], [], left)
                if not r:
                    continue
                data, addr = s.recvfrom(2048)
                ihl = (data[0] & 0x0F) * 4
                typ, _code, _ck, rid, rseq = struct.unpack("!BBHHH", data[ihl : ihl + 8])
                if typ == 0 and rid == ident and rseq == seq and addr[0] == dst:
                    received += 1
                    print(f"reply from {addr[0]} seq={seq} time={(time.monotonic() - t0) * 1e3:.3f} ms")
                    break
    print(f"PING_SUMMARY {count} {received}")
    return 0 if received == count else 1


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
