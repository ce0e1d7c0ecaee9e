# SPDX-License-Identifier: BSD-3-Clause
"""A secondary application of imagod, written against imago.h through ctypes: it opens an
endpoint, prints READY, and once a call tells it imagod is gone (-ENOTCONN), tries to send
and prints what each call returned: ``AFTER recv=R send=S``. Used by TestSuite_multiprocess.

    orphan_app.py LIBIMAGO PREFIX
"""

import ctypes
import sys
import time

from ctypes_app import attach

ENOTCONN = 107


def main() -> int:
    lib, im = attach(sys.argv[1], sys.argv[2])
    ep = ctypes.c_void_p()
    rc = lib.imago_open(im, b"orphan", ctypes.c_uint64(2), None, ctypes.byref(ep))
    if rc != 0:
        print(f"open {rc}", flush=True)
        return 1
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
