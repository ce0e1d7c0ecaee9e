# SPDX-License-Identifier: BSD-3-Clause
"""A secondary application of imagod, written against imago.h through ctypes: it opens an
endpoint, prints READY, and once a call tells it imagod is gone (-ENOTCONN), tries to send
and prints what each call returned: ``AFTER recv=R send=S``. Used by TestSuite_multiprocess.

    orphan_app.py LIBIMAGO PREFIX [big]

With ``big``: it also opens the endpoint's other end (on node 2, never read), sends messages
of 3000 bytes (the large pool) until every buffer is out (-EAGAIN for a second), prints
READY, and then sends on until a send returns something else: ``AFTER send_big=R`` (or
-EAGAIN after 10 s).
"""

import ctypes
import sys
import time

from ctypes_app import attach

EAGAIN = 11
ENOTCONN = 107


class EpOpts(ctypes.Structure):
    _fields_ = [("local_node", ctypes.c_uint64), ("ring_size", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


def big(lib, im, ep) -> int:
    """Fill the large pool toward an endpoint that never reads, then send until not -EAGAIN."""
    other = ctypes.c_void_p()
    rc = lib.imago_open(im, b"orphan", ctypes.c_uint64(1), ctypes.byref(EpOpts(2, 0, 0)), ctypes.byref(other))
    if rc != 0:
        print(f"open other {rc}", flush=True)
        return 1
    msg = ctypes.create_string_buffer(3000)
    stuck_since = None
    end = time.monotonic() + 20
    while time.monotonic() < end:
        rc = lib.imago_send(ep, msg, ctypes.c_uint32(3000), ctypes.c_uint32(0))
        if rc == 0:
            stuck_since = None
        elif rc == -EAGAIN:
            stuck_since = stuck_since or time.monotonic()
            if time.monotonic() - stuck_since >= 1.0:
                break
        else:
            print(f"send {rc}", flush=True)
            return 1
    print("READY", flush=True)
    rc, end = -EAGAIN, time.monotonic() + 10
    while rc == -EAGAIN and time.monotonic() < end:
        rc = lib.imago_send(ep, msg, ctypes.c_uint32(3000), ctypes.c_uint32(0))
        time.sleep(0.001)
    print(f"AFTER send_big={rc}", flush=True)
    return 0


def main() -> int:
    lib, im = attach(sys.argv[1], sys.argv[2])
    ep = ctypes.c_void_p()
    rc = lib.imago_open(im, b"orphan", ctypes.c_uint64(2), None, ctypes.byref(ep))
    if rc != 0:
        print(f"open {rc}", flush=True)
        return 1
    if len(sys.argv) > 3 and sys.argv[3] == "big":
        return big(lib, im, ep)
    print("READY", flush=True)
    msgs = ctypes.create_string_buffer(4096)  # room for a burst of one descriptor
    recv = 0
    end = time.monotonic() + 60
    while recv != -ENOTCONN and time.monotonic() < end:
        recv = lib.imago_recv_burst(ep, msgs, ctypes.c_uint(1))
        time.sleep(0.01)
    send = lib.imago_send(ep, b"x", ctypes.c_uint32(1), ctypes.c_uint32(0))
    print(f"AFTER recv={recv} send={send}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
