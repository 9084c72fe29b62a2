"""Keeping the process' resident memory close to what it uses after a burst of large requests.

glibc's malloc serves a large block (128 KiB and up) with its own mmap, returned to the system when freed, until a
block that large is freed: then it raises that threshold to the block's size (up to 32 MiB), so the next multi-MiB
bodies and JSON strings of the webhook come from the heap, where they fragment it and stay resident after they are
freed. 200 hostile 3 MiB reviews left the process about 30-50 MiB bigger for good; with the threshold pinned at
glibc's default they leave it a few MiB bigger (bench/webhook.py prints both figures). Pinning it (`mallopt`) turns
that adjustment off. Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
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
