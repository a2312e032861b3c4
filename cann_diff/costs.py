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
# ``guess_sizes`` walks at most this many of an input's child directories and takes
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


# Inputs whose reading costs less than this (cost model, CPU seconds, all inputs) are read
# one after the other: a side worker's start-up (~1 s) costs more than it saves.
SIDE_PROCESS_MIN_S = 0.3
# A side worker of a side of several large ranks wants two jobs: one for its Python, one
# for pyarrow's parse or a rank worker. With fewer jobs, such sides spread their ranks over
# one pool of rank workers instead (docs/performance.md, "Round 5" and "Turn 13").
JOBS_PER_SIDE_WORKER = 2
SIDE_PROCESS_MIN_JOBS = 2 * JOBS_PER_SIDE_WORKER
# With 2 or 3 jobs, inputs read side by side, one job each, use the cores once the reading
# they overlap (all of it but the last worker's: the cost model's total less when the last
# side worker ends) costs at least this much: below it the side workers' start and their
# sides' way back cost as much as they save. Measured on 2 cores against reading here
# (docs/performance.md, Turn 15), one rank a side: of 0.25M kernels 1.035× wall, of 0.5M
# 0.98–0.99×, of 1M 0.92–0.96× (by the model 0.3725, 0.7325 and 1.493 s overlapped). Both
# sides are then in memory at once, in two processes: Turn 13 left this out for that; the
# largest process is smaller, the processes' sum larger (Turn 15 gives both).
SIDES_SAVE_MIN_S = 1.0
# Where an input's ranks would spread over a shared pool of rank workers, that pool evens
# out the inputs; side workers pay off only for small ranks (a side read in one process
# costs less than its ranks sent out in chunks, and its results need not come back rank
# by rank) and when the inputs balance over them: handed out in order to the first free
# worker, they end within SIDES_BALANCE of the jobs' even share. Measured on 2 cores
# (Turn 15), by mean rank cost: 1,000 ranks of 164 kernels a side (0.008 s) 0.82× wall,
# 32 ranks of 31k kernels (0.053 s) 0.96×, 4 ranks of 1M kernels (1.49 s) 1.02–1.03×.
# Every input's own mean counts: a side of small ranks does not hide one of large ranks.
SIDES_BALANCE = 1.1
SIDES_RANK_MAX_S = 0.25


def guess_sizes(path: str | Path) -> list[int]:
    """The bytes of each rank of an input, guessed from a quick look.

    Each child directory of an input is taken for a rank, as the profilers write one
    directory per rank; the sizes of the first ``SIZE_SAMPLE`` (by name) stand for all. An
    input that holds one rank (a rank's own export, an msprof ``PROF_*`` directory, a
    directory with fewer than two children or with the rank output folder, a file) is one
    rank of all its bytes; nothing there, no rank.
    """
    name = os.path.basename(str(path).rstrip("/\\"))
    if name.endswith(RANK_SUFFIXES) or name.startswith(PROF_PREFIX):
        return [path_bytes(path)]
    try:
        with os.scandir(path) as entries:
            children = sorted(e.path for e in entries if e.is_dir())
    except OSError:  # a file, or nothing there: its read says what it is
        return [path_bytes(path)] if os.path.isfile(path) else []
    if len(children) < 2 or any(os.path.basename(c) == RANK_OUTPUT for c in children):
        return [path_bytes(path)]
    sample = [path_bytes(child) for child in children[:SIZE_SAMPLE]]
    mean = sum(sample) // len(sample)
    return sample + [mean] * (len(children) - len(sample))


def side_plan(sizes: Sequence[Sequence[int]], jobs: int, pool_min_s: float) -> tuple[int, int]:
    """Side workers for inputs whose ranks have ``sizes`` (bytes), and the jobs of each.

    (0, ``jobs``): one input after the other here, each with every job for its ranks.
    With ``SIDE_PROCESS_MIN_JOBS`` or more, the inputs go side by side once their reading
    costs ``SIDE_PROCESS_MIN_S``, ``JOBS_PER_SIDE_WORKER`` jobs or more each. With fewer,
    one job each once the reading they overlap costs ``SIDES_SAVE_MIN_S``, if no input
    would spread its ranks over rank workers (the saving ``spread_saves_s`` at most
    ``pool_min_s``: read here, they would be read one after the other) or if every input's
    ranks are small (``SIDES_RANK_MAX_S`` on average) and the inputs balance
    (``SIDES_BALANCE``).
    """
    if jobs < 2 or len(sizes) < 2:
        return 0, jobs
    costs = [read_cost_s(ranks) for ranks in sizes]
    total = sum(sum(c) for c in costs)
    if jobs >= SIDE_PROCESS_MIN_JOBS:
        if total < SIDE_PROCESS_MIN_S:
            return 0, jobs
        workers = min(len(sizes), jobs // JOBS_PER_SIDE_WORKER)
        return workers, max(1, jobs // workers)
    workers = min(len(sizes), jobs)
    last_ends = _makespan([sum(c) for c in costs], workers)
    if total - last_ends < SIDES_SAVE_MIN_S:
        return 0, jobs
    if any(spread_saves_s(c, jobs) > pool_min_s for c in costs) and (
            max(sum(c) / len(c) for c in costs if c) > SIDES_RANK_MAX_S
            or last_ends > SIDES_BALANCE * total / jobs):
        return 0, jobs
    return workers, jobs // workers


def _makespan(costs: Sequence[float], workers: int) -> float:
    """When the last of ``costs`` ends, each handed in order to the first free worker."""
    free = [0.0] * workers
    for cost in costs:
        first = free.index(min(free))
        free[first] += cost
    return max(free)


def workers_likely(paths: Sequence[str | Path], jobs: int, pool_min_s: float) -> bool:
    """Whether reading ``paths`` will likely want worker processes, from a quick look.

    The planner's answers (``spread_saves_s`` over ``pool_min_s`` for an input's ranks,
    ``side_plan`` for the inputs together) on the sizes ``guess_sizes`` gives. An input
    whose ranks lie deeper is not seen as several: its workers then start once its ranks
    are found.
    """
    if jobs < 2:
        return False
    guesses = []
    for path in paths:
        guesses.append(guess_sizes(path))
        if spread_saves_s(read_cost_s(guesses[-1]), jobs) > pool_min_s:
            return True
    return side_plan(guesses, jobs, pool_min_s)[0] > 0
