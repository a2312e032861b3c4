"""Memory allocation for one command's run: keep freed memory for reuse.

A comparison builds and drops column arrays of megabytes again and again. With the
defaults, pyarrow's mimalloc pool and glibc's malloc hand each freed block back to the
system and take fresh pages for the next, and every fresh page is a page fault: at 1M
kernels per side (one job) that was 1.9-2.8 s of system time beside 5.0 s of user time.
With pyarrow on the system allocator and glibc keeping what it frees (blocks up to 32 MiB
from the heap, no trimming below 1 GiB), the same run spends 0.48 s in the system and 0.69×
the wall time, at 1.4× the peak memory, 718 against 519 MiB for 676 MB of input
(docs/performance.md, "Round 5").

Only the command line calls ``tune``: a library caller's process is its own. The
settings go into the environment too, so the worker processes (a forkserver starts a
fresh interpreter) begin with them. A value the user has set is left as it is.
"""

from __future__ import annotations

import os

MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: bigger blocks are mapped (and unmapped)
TRIM_THRESHOLD = 2**30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>

ENVIRONMENT = {
    "ARROW_DEFAULT_MEMORY_POOL": "system",
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
}


def tune() -> None:
    """Set this process (and its future workers) to reuse freed memory; before pyarrow loads.

    Elsewhere than glibc the malloc settings have no effect and are skipped.
    """
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (ImportError, OSError, AttributeError):  # no ctypes, or not glibc
        return
    for parameter, name in ((_M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_"),
                            (_M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_")):
        try:
            mallopt(parameter, int(os.environ[name]))
        except (ValueError, OverflowError, ctypes.ArgumentError):
            continue  # the user's own setting, which glibc read (or refused) at start
