"""Keeping the process' resident memory close to what it uses after a burst of large requests.

glibc's malloc serves a large block (128 KiB and up) with its own mmap, returned to the system when freed, until a
block that large is freed: then it raises that threshold to the block's size (up to 32 MiB), so the next multi-MiB
bodies and JSON strings of the webhook come from the heap, where they fragment it and stay resident after they are
freed. 200 hostile 3 MiB reviews left the process about 30-50 MiB bigger for good; with the threshold pinned at
glibc's default they leave it a few MiB bigger (bench/webhook.py prints both figures). Pinning it (`mallopt`) turns
that adjustment off. Other C libraries are left alone.

After a burst of reconciles (a bulk apply, a restart) the heap holds tens of MiB that are free but not given back:
glibc returns the top of the heap only, and the burst's short-lived objects are interleaved with the cache's
long-lived ones. `trim_heap` (glibc's `malloc_trim`) gives back every free page wherever it lies; the manager calls it
once the work queues have drained after a burst (`app.kube.manager`).

At exit, what the process holds is freed with it: `skip_last_collection` spares the interpreter its last garbage
collection, which would walk every object first (a third of a second for `kflare run`, most of a second for a test
session), only for the system to free them anyway.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import logging
from typing import Final

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD: Final = -3
"""glibc's `mallopt` parameter number (malloc.h)."""
MMAP_THRESHOLD: Final = 128 * 1024
"""glibc's default threshold: blocks from this size up are mapped, and unmapped when freed."""


def pin_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold; False where there is no glibc `mallopt` or it refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    pinned = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    log.debug("malloc's mmap threshold %s", "pinned" if pinned else "left as it is")
    return pinned


def trim_heap() -> bool:
    """Give the heap's free pages back to the system; False where there is no glibc `malloc_trim`. It walks the
    whole heap (milliseconds for hundreds of MiB): call it off the event loop."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    return bool(malloc_trim(0))


def skip_last_collection() -> None:
    """Freeze the heap at exit, out of the interpreter's last collection's sight; once, however often called."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
