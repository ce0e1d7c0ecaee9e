# SPDX-License-Identifier: BSD-3-Clause
"""Hand-made imago frames, crafted with scapy (Debian's python3-scapy) and sent into a node's
interface, for suites that check what a receiver does with frames no honest node sends.

:func:`reliability_frame` builds an L2 frame (EtherType 0x88B5, link header, a 48-byte
reliability ``FrameHeader`` naming ``src_node`` and ``dst_node``; docs/PROTOCOL.md sections 1
and 3.2.1) and :func:`inject` sends frames out of an interface inside a node's namespace (a
``python3`` process there, since a namespace is a property of a process).
"""

from __future__ import annotations

import struct
import sys

from framework.exceptions import AppError
from framework.node import Node
from framework.topology import Interface

ETHERTYPE_IMAGO = 0x88B5
LINK_VERSION = 1
LINK_RELIABILITY = 2
FRAME_DATA = 3
FRAME_GROUP_DATA = 5


def scapy_missing_reason() -> str | None:
    """None when scapy can be imported, else why not."""
    try:
        import scapy.all  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means: no scapy
        return f"scapy unavailable ({e}): apt-get install python3-scapy"
    return None


def reliability_frame(*, src_mac: str, dst_mac: str, src_node: int, dst_node: int,
                      frame_type: int = FRAME_DATA) -> bytes:
    """An untagged L2 imago frame carrying a ``FrameHeader`` of @p frame_type (DATA; or
    GROUP_DATA, whose @p dst_node is a group id) from @p src_node."""
    from scapy.all import Ether, Raw

    hdr = struct.pack(">BBBBII", 1, frame_type, 0, 0, src_node, dst_node) + bytes(40)
    link = struct.pack(">BBH", LINK_VERSION, LINK_RELIABILITY, len(hdr))
    return bytes(Ether(src=src_mac, dst=dst_mac, type=ETHERTYPE_IMAGO) / Raw(load=link + hdr))


_SENDER = """
import sys
from scapy.all import Ether, sendp
frames = [Ether(bytes.fromhex(h)) for h in sys.stdin.read().split()]
sendp(frames, iface=sys.argv[1], inter=float(sys.argv[2]), verbose=False)
print(len(frames))
"""


_RAW_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
gap = float(sys.argv[2])
frames = [bytes.fromhex(h) for h in sys.stdin.read().split()]
for i, f in enumerate(frames):
    s.send(f)
    if i % 32 == 31:
        time.sleep(gap)  # a breath per 32 frames: each sleep costs milliseconds on a busy machine
print(len(frames))
"""


def inject_raw(node: Node, iface: Interface, frames: list[bytes], *, gap_s: float = 0.001,
               timeout: float = 60.0) -> None:
    """As inject(), through a raw AF_PACKET socket instead of scapy, 32 frames at a time
    @p gap_s apart: starts in milliseconds where importing scapy takes seconds on a loaded
    machine, so a set of frames lands while something else is still running."""
    _send(node, iface, frames, _RAW_SENDER, gap_s, timeout)


def inject(node: Node, iface: Interface, frames: list[bytes], *, gap_s: float = 0.001,
           timeout: float = 60.0) -> None:
    """Send @p frames out of @p iface (an interface of @p node), @p gap_s apart.

    Raises:
        AppError: the sender failed or sent another number of frames.
    """
    _send(node, iface, frames, _SENDER, gap_s, timeout)


def _send(node: Node, iface: Interface, frames: list[bytes], program: str, gap_s: float, timeout: float) -> None:
    if iface.node is not node:
        raise ValueError(f"{iface} is not an interface of {node}")
    cp = node.exec([sys.executable, "-c", program, iface.name, repr(gap_s)], timeout=timeout, check=False,
                   stdin_text="\n".join(f.hex() for f in frames))
    if cp.returncode != 0 or cp.stdout.strip() != str(len(frames)):
        raise AppError(f"injecting {len(frames)} frames on {iface}: exit {cp.returncode}: {cp.stderr[-400:]}")
