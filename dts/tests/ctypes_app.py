# SPDX-License-Identifier: BSD-3-Clause
"""What the ctypes applications of the DTS (orphan_app.py, stall_app.py) share: load
libimago and attach to imagod as a secondary, as a user's program written against imago.h
would."""

import ctypes
import sys


def attach(lib_path: str, prefix: str) -> tuple[ctypes.CDLL, ctypes.c_void_p]:
    """@return the library and the attachment; prints ``attach RC`` and exits 1 on failure."""
    lib = ctypes.CDLL(lib_path)
    im = ctypes.c_void_p()
    rc = lib.imago_attach_secondary(prefix.encode(), ctypes.byref(im))
    if rc != 0:
        print(f"attach {rc}", flush=True)
        sys.exit(1)
    return lib, im
