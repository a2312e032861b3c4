"""The read planner's cost model, free of pandas: what reading an input's ranks costs.

``read.execute`` plans every read with it (``plan_read``, ``plan_ranks``). It lives
outside the read package, which imports pandas, because the command line asks it one
question before it imports anything: whether reading will want worker processes
(``workers_likely``), so that the forkserver's imports can run beside its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# Reading and reducing a rank costs about READ_S_PER_RANK of CPU however small it is
# (opening its few files, pyarrow's per-file set-up, the per-call overhead of its frames)
# plus READ_S_PER_BYTE for each byte of its files (a 1M-kernel text rank, 330 MB, ~1.5 s).
# Measured on a 2-core machine, docs/performance.md "Turn 4: by bytes".
READ_S_PER_RANK = 0.008
READ_S_PER_BYTE = 4.5e-9
# ``workers_likely`` walks at most this many of an input's child directories and takes
# their mean size for the others.
SIZE_SAMPLE = 8
# Directory names that mark one rank's own export: its children are not ranks.
RANK_SUFFIXES = ("_ascend_pt", "_ascend_ms")
RANK_OUTPUT = "ASCEND_PROFILER_OUTPUT"
# An msprof ``PROF_*`` directory is one rank's: its device and host folders are not ranks.
PROF_PREFIX = "PROF_"


def path_bytes(path: str | Path) -> int:
    """Bytes of the files at or below ``path`` (0 for what cannot be examined)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def read_cost_s(sizes: Sequence[int]) -> list[float]:
    """CPU seconds the cost model gives the reading of ranks of these sizes (bytes)."""
    return [READ_S_PER_RANK + READ_S_PER_BYTE * size for size in sizes]


def spread_saves_s(costs: Sequence[float], jobs: int) -> float:
    """Wall seconds ``jobs`` workers save on ``costs`` (seconds).

    The serial sum less the longer of an even share and the largest rank (a rank is read
    by one worker).
    """
    if not costs:
        return 0.0
    total = sum(costs)
    return total - max(total / max(1, min(jobs, len(costs))), max(costs))


def workers_likely(paths: Sequence[str | Path], jobs: int, pool_min_s: float) -> bool:
    """Whether reading one of ``paths`` will likely want rank workers, from a quick look.

    Each child directory of an input is taken for a rank, as the profilers write one
    directory per rank; the sizes of the first ``SIZE_SAMPLE`` (by name) stand for all.
    The answer is the planner's (``spread_saves_s`` over ``pool_min_s``) on those guesses.
    An input whose ranks lie deeper is not seen: its workers then start once its ranks
    are found.
    """
    if jobs < 2:
        return False
    for path in paths:
        name = os.path.basename(str(path).rstrip("/\\"))
        if name.endswith(RANK_SUFFIXES) or name.startswith(PROF_PREFIX):
            continue
        try:
            with os.scandir(path) as entries:
                children = sorted(e.path for e in entries if e.is_dir())
        except OSError:  # a file, or nothing there: its read says what it is
            continue
        if len(children) < 2 or any(os.path.basename(c) == RANK_OUTPUT for c in children):
            continue
        sample = [path_bytes(child) for child in children[:SIZE_SAMPLE]]
        mean = sum(sample) // len(sample)
        sizes = sample + [mean] * (len(children) - len(sample))
        if spread_saves_s(read_cost_s(sizes), jobs) > pool_min_s:
            return True
    return False
