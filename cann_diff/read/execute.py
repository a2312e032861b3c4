"""Where reading runs: one Executor protocol, four executors, one chunking rule, one plan.

Reading a rank is Python and pandas work that holds the interpreter lock most of the
time, so threads give no second core; processes do. An executor maps a function over
chunks of work and hands back the results in order, raising the first error a chunk
raised (errors pickle, ``errors.py``). ``plan_ranks`` decides, from the number of rank
sources, ``--jobs`` and ``--scheduler``, which executor reads the ranks of one input and
how the sources are chunked; ``plan_sides`` decides whether the inputs themselves are
read side by side in processes (``pipeline.read_sides``).

Worker processes come from a forkserver (a spawn where there is none), never a plain
fork: the parent may hold pyarrow's native threads, and a fork taken while one of them
holds an allocator lock hangs the child.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import InputError

# A process pool pays a forkserver start (the package imported once, ~1 s of CPU) and
# the pickling of every rank's summaries (~2 ms each); one rank's read costs ~10-30 ms.
# Below this many ranks the threads of the caller's process are cheaper.
RANK_PROCESS_MIN = 32
# Chunks per worker: enough to amortize a task's round trip, few enough that the workers
# finish together and progress moves. A chunk's small ranks are reduced as one stack.
TASKS_PER_WORKER = 4
# Ranks per Dask task: a cluster's size is not known here, so its tasks are many and small.
DASK_CHUNK_RANKS = 16
# Inputs below this many bytes are read one after the other: a side worker's start-up
# (~1 s) costs more than it saves.
SIDE_PROCESS_MIN_BYTES = 64 * 2**20
# A side worker wants two cores of its own: one for its Python, one for pyarrow's parse.
# With two jobs in all, two sides in processes ran 17-25 % slower (wall) than one after the
# other, each parse on both cores (0.25M, 1M and 4M kernels per side; docs/performance.md,
# "Round 5"). So there are at most jobs // JOBS_PER_SIDE_WORKER side workers, and at least 2.
JOBS_PER_SIDE_WORKER = 2
SIDE_PROCESS_MIN_JOBS = 2 * JOBS_PER_SIDE_WORKER

Progress = Callable[[int, int], None]


class Executor(Protocol):
    """Runs ``func`` on every chunk; results in the chunks' order, the first error raised."""

    def run(self, func: Callable[[Any], Any], chunks: Sequence[Any],
            progress: Progress) -> list[Any]:
        """``[func(c) for c in chunks]``; ``progress(done, total)`` after each chunk."""
        ...


def chunked(items: Sequence[Any], workers: int, most: int | None = None) -> list[list[Any]]:
    """``items`` in ``TASKS_PER_WORKER`` chunks per worker, at most ``most`` items each."""
    size = max(1, math.ceil(len(items) / (max(workers, 1) * TASKS_PER_WORKER)))
    size = min(size, most) if most else size
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


class InOrder:
    """In this process, one chunk after the other."""

    def run(self, func, chunks, progress):
        """Run each chunk here."""
        results = []
        for number, chunk in enumerate(chunks, 1):
            results.append(func(chunk))
            progress(number, len(chunks))
        return results


@dataclass(frozen=True)
class Threads:
    """In ``jobs`` threads of this process (I/O-bound work, or pyarrow's own threads)."""

    jobs: int

    def run(self, func, chunks, progress):
        """Run the chunks in a thread pool."""
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            futures = [pool.submit(func, chunk) for chunk in chunks]
            results = []
            for number, future in enumerate(futures, 1):
                results.append(future.result())
                progress(number, len(chunks))
            return results


def pool_context(preload: str = "cann_diff.read") -> Any:
    """A forkserver context that imports ``preload`` once, else spawn.

    The forkserver imports the module single-threaded and forks each worker from that
    clean state. One forkserver serves a process: the first caller's preload holds.
    """
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([preload])
        return context
    return multiprocessing.get_context("spawn")


def kill_pool(pool: Any) -> None:
    """Stop a pool's queued work and kill its workers (this pool's processes only)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in list((pool._processes or {}).values()):
        process.kill()


@dataclass(frozen=True)
class Processes:
    """In ``jobs`` worker processes (forkserver) that import ``preload`` once.

    ``meanwhile`` runs in this process once the chunks are submitted (an import the
    caller needs next, while the workers read).
    """

    jobs: int
    preload: str = "cann_diff.read"
    meanwhile: Callable[[], None] | None = None

    def run(self, func, chunks, progress):
        """Run the chunks in a process pool; on any error or interrupt, kill it."""
        from concurrent.futures import ProcessPoolExecutor

        workers = max(1, min(self.jobs, len(chunks)))
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(self.preload))
        try:
            futures = [pool.submit(func, chunk) for chunk in chunks]
            if self.meanwhile is not None:
                self.meanwhile()
            results = []
            for number, future in enumerate(futures, 1):
                results.append(future.result())
                progress(number, len(chunks))
        except BaseException:
            kill_pool(pool)  # the workers of this pool only
            raise
        pool.shutdown()
        return results


@dataclass(frozen=True)
class Dask:
    """On an existing Dask cluster (the optional extra ``cann-diff[dask]``)."""

    address: str
    timeout_s: float

    def run(self, func, chunks, progress):
        """Map the chunks over the cluster's workers."""
        try:
            from distributed import Client
        except ImportError:
            raise InputError(None, "--scheduler needs Dask: pip install "
                                   "'cann-diff[dask]'") from None
        try:
            client = Client(self.address, timeout=self.timeout_s, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(None, f"cannot reach Dask scheduler {self.address}: "
                                   f"{exc}") from None
        try:
            futures = client.map(func, chunks, pure=False)
            results = []
            for number, future in enumerate(futures, 1):
                results.append(future.result())
                progress(number, len(chunks))
            return results
        finally:
            client.close()


@dataclass(frozen=True)
class Plan:
    """An executor and the chunks of work it is given."""

    executor: Executor
    chunks: list[list[Any]]


def plan_ranks(sources: Sequence[Any], jobs: int, scheduler: str | None,
               timeout_s: float) -> Plan:
    """How the rank sources of one input are read.

    On a Dask cluster in chunks of at most ``DASK_CHUNK_RANKS``; with ``jobs`` ≥ 2 and at
    least ``RANK_PROCESS_MIN`` sources in worker processes, ``TASKS_PER_WORKER`` chunks per
    job; with fewer sources a rank per thread (pyarrow parses outside the interpreter
    lock); with one job or one source in this process, all in one chunk (its small ranks
    stack).
    """
    if scheduler:
        return Plan(Dask(scheduler, timeout_s), chunked(sources, max(jobs, 1),
                                                        DASK_CHUNK_RANKS))
    if jobs >= 2 and len(sources) >= RANK_PROCESS_MIN:
        return Plan(Processes(jobs), chunked(sources, jobs))
    if jobs <= 1 or len(sources) == 1:
        return Plan(InOrder(), [list(sources)])
    return Plan(Threads(jobs), [[source] for source in sources])


def _large(paths: Sequence[str | Path], limit: int) -> bool:
    """Whether the inputs hold at least ``limit`` bytes (the walk stops once they do)."""
    total = 0
    for path in paths:
        for root, _dirs, names in os.walk(path):
            for name in names:
                try:
                    total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
                except OSError:
                    continue
                if total >= limit:
                    return True
        if os.path.isfile(path):
            total += os.path.getsize(path)
    return total >= limit


def plan_sides(paths: Sequence[str | Path], jobs: int, scheduler: str | None) -> int:
    """How many side workers read the inputs at the same time; 0: one after the other.

    Side workers only with ``jobs`` ≥ ``SIDE_PROCESS_MIN_JOBS``, two inputs or more, no
    Dask scheduler (which spreads the ranks itself) and inputs of at least
    ``SIDE_PROCESS_MIN_BYTES``; each then has ``JOBS_PER_SIDE_WORKER`` jobs or more.
    """
    if jobs < SIDE_PROCESS_MIN_JOBS or scheduler or len(paths) < 2 or \
            not _large(paths, SIDE_PROCESS_MIN_BYTES):
        return 0
    return min(len(paths), jobs // JOBS_PER_SIDE_WORKER)
