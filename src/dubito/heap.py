"""Keep freed heap memory in the process (glibc): what dubito's own processes choose for themselves.

glibc gives the top of the heap back to the OS once more than ``M_TRIM_THRESHOLD`` is free there
(by default twice the largest block freed so far), and serves blocks above ``M_MMAP_THRESHOLD`` by
``mmap``, unmapped again on free. A training step that allocates and frees hundreds of MB of
temporaries then faults every page in again, zeroed, on each step: B-DeepNoise's initialiser
(100 noise draws x 1,000 rows x 50 units per layer) took 31,000 minor page faults and 620 ms per
Adam step on one thread here, and 0 faults and 446 ms with both thresholds raised (the same
numbers: only where memory comes from changes). The cost is resident memory: the process keeps
up to ``TRIM_THRESHOLD`` of freed heap.

This is an application's decision, so the library never makes it on import: the ``dubito``
command (``run``, ``bench``) and dubito's worker processes (`dubito._parallel.init_worker`) call
`retain_freed_memory`. In your own script, call it yourself, or start Python with
``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824`` in the environment.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["retain_freed_memory"]

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's ceiling for M_MMAP_THRESHOLD on 64-bit (4 MiB x sizeof(long)): blocks up to it come from the heap
MMAP_THRESHOLD = 32 * 1024 * 1024
#: free heap kept at the top before any is given back
TRIM_THRESHOLD = 1 << 30


def retain_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (the module docstring); True where
    it took effect, False elsewhere (not Linux, no glibc, or mallopt refused)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
