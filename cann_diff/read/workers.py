"""Worker processes for reading: the ranks of one input, and (``pipeline.read_sides``) sides.

Reading a rank is Python and pandas work that holds the interpreter lock most of the
time, so threads give no second core; processes do. Workers come from a forkserver (a
spawn where there is none), never a plain fork: the parent may hold pyarrow's native
threads, and a fork taken while one of them holds an allocator lock hangs the child.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# A process pool pays a forkserver start (the package imported once, ~1 s of CPU) and
# the pickling of every rank's summaries (~2 ms each); one rank's read costs ~10-30 ms.
# Below this many ranks the threads of the caller's process are cheaper.
RANK_PROCESS_MIN = 32
# Ranks a worker reads per task: enough to amortize a task's round trip, few enough that
# the workers finish together and progress moves.
TASKS_PER_WORKER = 4


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


@dataclass(frozen=True)
class Batch:
    """A picklable call of ``reader`` on several sources, one result each."""

    reader: Callable[[Any], Any]

    def __call__(self, sources: Sequence[Any]) -> list[Any]:
        """Read ``sources`` in order; the first CannDiffError travels back pickled."""
        return [self.reader(source) for source in sources]


def kill_pool(pool: Any) -> None:
    """Stop a pool's queued work and kill its workers (this pool's processes only)."""
    pool.shutdown(wait=False, cancel_futures=True)
    for process in list((pool._processes or {}).values()):
        process.kill()


def read_in_processes(reader: Callable[[Any], Any], sources: Sequence[Any], jobs: int,
                      progress: Callable[[int, int], None]) -> list[Any]:
    """``[reader(s) for s in sources]`` on ``jobs`` worker processes, in order.

    Sources go out in batches (``TASKS_PER_WORKER`` per worker); ``progress(done,
    total)`` follows the batches in order. The first CannDiffError is raised here.
    """
    from concurrent.futures import ProcessPoolExecutor

    workers = max(1, min(jobs, len(sources)))
    size = max(1, math.ceil(len(sources) / (workers * TASKS_PER_WORKER)))
    batches = [sources[i:i + size] for i in range(0, len(sources), size)]
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=pool_context())
    try:
        futures = [pool.submit(Batch(reader), batch) for batch in batches]
        results: list[Any] = []
        for future in futures:
            results += future.result()
            progress(len(results), len(sources))
    except BaseException:
        kill_pool(pool)
        raise
    pool.shutdown()
    return results
