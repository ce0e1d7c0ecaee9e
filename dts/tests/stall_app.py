# SPDX-License-Identifier: BSD-3-Clause
"""A secondary application of imagod, written against imago.h through ctypes, whose control
requests meet an imagod that does not answer for a while. It attaches, prints ATTACHED, waits
for file GO to exist (the test stops imagod first), then opens endpoint "stall" to node 2
(imagod answers only once it runs again), opens the same name again, closes the first, and
opens it once more; it prints what each returned and how long the first open took:
``RESULT open=R open_s=S again=R close=R reopen=R``. Used by TestSuite_multiprocess.

    stall_app.py LIBIMAGO PREFIX GO
"""

import ctypes
import os
import sys
import time

from ctypes_app import attach


def main() -> int:
    lib, im = attach(sys.argv[1], sys.argv[2])
    print("ATTACHED", flush=True)
    end = time.monotonic() + 60
    while not os.path.exists(sys.argv[3]) and time.monotonic() < end:
        time.sleep(0.01)
    open_ep = lambda ep: lib.imago_open(im, b"stall", ctypes.c_uint64(2), None, ctypes.byref(ep))
    first, second, third = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    t0 = time.monotonic()
    opened = open_ep(first)
    took = time.monotonic() - t0
    again = open_ep(second)
    closed = lib.imago_close(first) if opened == 0 else None
    reopened = open_ep(third)
    print(f"RESULT open={opened} open_s={took:.2f} again={again} close={closed} reopen={reopened}", flush=True)
    lib.imago_detach(im)
    return 0


if __name__ == "__main__":
    sys.exit(main())
