"""Memory allocation for one command's run: keep freed memory for reuse.

A comparison builds and drops column arrays of megabytes again and again. With glibc's
defaults, malloc hands each freed block back to the system and takes fresh pages for the
next, and every fresh page is a page fault. Round 5 (docs/performance.md) measured 1.9-2.8 s
of system time beside 5.0 s of user time at 1M kernels per side (one job). With glibc
keeping what it frees (blocks up to 32 MiB from the heap, no trimming below 1 GiB) and
pyarrow on the system allocator, the same run spent 0.48 s in the system and took 0.69×
the wall time. Turn 11 measured pyarrow's own pool (mimalloc) beside the tuned glibc:
the same wall time (1.01×, 7 pairs) and a lower peak at 1M kernels per side, 561 against
707 MiB for 676 MB of input. So pyarrow keeps its own pool, and only glibc is tuned.

numpy asks for transparent huge pages on every array of 4 MiB or more
(``madvise(MADV_HUGEPAGE)``). Where the kernel compacts memory for such a request as it
faults the pages in (THP ``defrag`` set to ``madvise``, a common default), a process that
has just read gigabytes into the page cache stalls in that compaction: at 4 ranks of 1M
kernels per side, the comparison's statistics over 4M samples a side spent 1.7-1.9 s of
its 2.9-3.3 s in the system. With ``NUMPY_MADVISE_HUGEPAGE=0`` it took 1.9-2.1 s, 0.6 s of
it in the system (docs/performance.md, "Turn 11").

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
    "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
    "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD),
    "NUMPY_MADVISE_HUGEPAGE": "0",  # read when numpy is imported: tune() comes first
}


def tune() -> None:
    """Set this process (and its future workers) to reuse freed memory; before numpy loads.

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
