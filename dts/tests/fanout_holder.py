# SPDX-License-Identifier: BSD-3-Clause
"""Hold the AF_PACKET fanout groups DPDK 22.11's net_af_packet would give interface TARGET in
the next COUNT processes (its group number is process id XOR interface index, per network
namespace), on sockets bound to interface OTHER: a process started meanwhile that opens
TARGET through net_af_packet then fails with EINVAL, as when another process's number clashes
by chance. Prints ``HOLDING N``, then sleeps SECONDS. Used by TestSuite_lifecycle.

    fanout_holder.py TARGET OTHER COUNT SECONDS
"""

import os
import resource
import socket
import struct
import sys
import time

SOL_PACKET, PACKET_FANOUT = 263, 18
FANOUT_FLAGS = 0x8000 | 0x1000  # PACKET_FANOUT_HASH (0) | FLAG_DEFRAG | FLAG_ROLLOVER, as DPDK


def main() -> int:
    target, other, count, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    resource.setrlimit(resource.RLIMIT_NOFILE, (count + 64, count + 64))
    index = socket.if_nametoindex(target)
    held = []
    for pid in range(os.getpid(), os.getpid() + count):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
        s.bind((other, 0))
        try:
            s.setsockopt(SOL_PACKET, PACKET_FANOUT, struct.pack("I", ((pid ^ index) & 0xFFFF) | FANOUT_FLAGS << 16))
            held.append(s)
        except OSError:
            s.close()
    print(f"HOLDING {len(held)}", flush=True)
    time.sleep(seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
