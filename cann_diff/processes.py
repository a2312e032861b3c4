"""Worker processes: where they come from, how they start, how they are stopped.

Worker processes come from a forkserver (a spawn where there is none), never a plain
fork: the parent may hold pyarrow's native threads, and a fork taken while one of them
holds an allocator lock hangs the child. The forkserver imports its preload once; the
command starts it early when it will need workers anyway (``start_forkserver``), so that
those imports run beside its own.

Ctrl-C is for the parent. A terminal sends SIGINT to the whole process group, and a worker
that took it would print its own traceback, or die idle and leave the pool broken, while
the parent waits. So workers (and the forkserver, which is started with SIGINT and SIGTERM
blocked) ignore SIGINT; the parent, interrupted, stops them: SIGTERM first, on which a
worker stops its own pools the same way (a side worker reading its ranks in processes)
and leaves, then SIGKILL for any still there after ``STOP_GRACE_S``. Every worker's
temporary files go below one directory of the parent's, removed once the pool is gone,
even when a worker had to be killed.

Nothing here imports pandas: the command line starts the forkserver before it does.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .errors import EXIT_SIGTERM

# Seconds an interrupted parent gives its workers to unwind after SIGTERM before it kills
# them: enough for a chunk to leave the C call it is in (a pyarrow parse of one rank takes
# well under a second) and stop a nested pool, which gets half of it.
STOP_GRACE_S = 4.0
# Seconds a stopped pool's manager thread gets to leave on its own before it is taken for
# stuck on a half-sent result (``kill_pool``); it normally leaves within milliseconds.
MANAGER_STUCK_S = 1.0
# The signals a worker must not take from the terminal: its parent handles them.
PARENT_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def pool_context(preload: str | Sequence[str] = "cann_diff.read") -> Any:
    """A forkserver context that imports ``preload`` (a module or several) once, else spawn.

    The forkserver imports the modules single-threaded and forks each worker from that
    clean state. One forkserver serves a process: the first caller's preload holds.
    """
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        _short_socket_directory()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([preload] if isinstance(preload, str) else
                                       list(preload))
        return context
    return multiprocessing.get_context("spawn")


def start_forkserver(preload: Sequence[str]) -> bool:
    """Start this process's forkserver now, importing ``preload``; False where there is none.

    The forkserver imports its preload before it forks a worker, and a pool's first submit
    waits for that (0.7-1.5 s of pandas, matplotlib and cann-diff). Started at the
    command's start, those imports run on another core beside this process's own imports
    and reading. The signals are held back as for any worker start (``_workers_starting``).
    """
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    from multiprocessing import forkserver

    global _forkserver_started
    with _workers_starting():
        pool_context(preload)
        forkserver.ensure_running()
    _forkserver_started = True
    return True


_forkserver_started = False


def forkserver_started() -> bool:
    """True once ``start_forkserver`` has started this process's forkserver."""
    return _forkserver_started


# The bytes an AF_UNIX socket's path may have (sun_path less its NUL, on Linux), and
# what multiprocessing adds to its temporary directory for the forkserver's socket
# ("/pymp-XXXXXXXX/listener-XXXXXXXX").
SOCKET_PATH_MAX = 107
SOCKET_NAME_BYTES = 32
SHORT_TEMP_DIRS = ("/tmp", "/var/tmp")


def _short_socket_directory() -> None:
    """Have multiprocessing keep its sockets in /tmp when TMPDIR is too long for them.

    The forkserver listens on a socket below multiprocessing's temporary directory, made
    in ``tempfile.gettempdir()``: under a TMPDIR of more than ~75 bytes its bind fails
    ("AF_UNIX path too long"). Only that directory moves (made once, removed at exit by
    multiprocessing as usual); the workers' own temporary files stay under TMPDIR.
    """
    from multiprocessing import current_process, util

    if "tempdir" in current_process()._config:  # type: ignore[attr-defined]  # made already
        return
    if len(os.fsencode(tempfile.gettempdir())) + SOCKET_NAME_BYTES <= SOCKET_PATH_MAX:
        return
    short = next((d for d in SHORT_TEMP_DIRS if os.access(d, os.W_OK | os.X_OK)), None)
    if short is None:
        return  # the bind names the problem
    saved = tempfile.tempdir
    tempfile.tempdir = short
    try:
        util.get_temp_dir()
    finally:
        tempfile.tempdir = saved


@contextmanager
def _workers_starting() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while worker processes are started; deliver them after.

    Two things are needed. The signals are blocked in this thread, because a process
    inherits the mask it is started with: the forkserver (started by the first worker) and
    a spawned worker then cannot take a Ctrl-C during their start-up, before they could
    ignore it. And (in the main thread) Python's handlers are swapped for ones that only
    remember the signal, as another thread of this process may take it: an interrupt in
    the middle of a start would leave a worker that the pool does not list yet, and so
    that nothing stops. The remembered signal is raised once every worker is listed.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    # The pool's first lock starts multiprocessing's resource tracker, which unblocks both
    # signals once it has started (CPython 3.11-3.13 restore no earlier mask): start it now.
    resource_tracker.ensure_running()
    caught: list[int] = []
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        # A signal this process ignores (SIGINT in a worker) stays ignored: not deferred.
        handlers = {number: signal.signal(number, lambda number, _: caught.append(number))
                    for number in sorted(PARENT_SIGNALS)
                    if signal.getsignal(number) is not signal.SIG_IGN}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a blocked one arrives now
        for number, handler in handlers.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if caught:
            signal.raise_signal(caught[0])


# The process pools running in this process now, and the grace its pools get (half its
# parent's in a worker).
_pools: list[Any] = []
_grace_s = STOP_GRACE_S


def _stop_worker(_signum, _frame) -> None:
    """SIGTERM in a worker: stop the pools it runs, then leave without unwinding.

    The worker's temporary files lie below its parent's directory, which the parent
    removes; its own pools (a side worker reading its ranks in processes) are stopped the
    same way, so that none of their workers outlives it. Then multiprocessing's exit
    handlers run (they release the pools' semaphores) and the process ends: an exception
    raised here instead could land anywhere, in a finalizer that swallows it or in
    multiprocessing's loop, which prints it as a traceback.
    """
    from multiprocessing import util

    for pool in list(_pools):
        kill_pool(pool, _grace_s)
    util._exit_function()  # type: ignore[attr-defined]  # what a worker runs at its exit
    os._exit(EXIT_SIGTERM)


def _start_worker(temp_root: str, grace_s: float, sockets: str) -> None:
    """Pool initializer: SIGINT ignored, SIGTERM stops, temporary files below ``temp_root``.

    multiprocessing's own files (the socket of a forkserver the worker starts for a pool
    of its own) go to ``sockets``, the parent's directory for them: below ``temp_root``
    their paths could outgrow the 107 bytes a socket's name may have.
    """
    from multiprocessing import current_process

    global _grace_s
    _grace_s = grace_s
    # What util.get_temp_dir reads (multiprocessing keeps no public way to set it).
    current_process()._config.setdefault("tempdir", sockets)  # type: ignore[attr-defined]
    tempfile.tempdir = temp_root
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_worker)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENT_SIGNALS)


def kill_pool(pool: Any, grace_s: float = 0.0) -> None:
    """Stop a pool's workers and its queued work (this pool's processes only).

    With ``grace_s`` the workers get SIGTERM first and that long to stop their own pools and
    leave (``_stop_worker``); whatever is left is killed. Returns once every worker is
    gone. The pool is shut down only then: a worker still starting unpickles the pool's
    queues, whose semaphores the shutdown releases.
    """
    processes = list((pool._processes or {}).values())
    results = getattr(pool, "_result_queue", None)  # the shutdown below forgets it
    if grace_s > 0:
        for process in processes:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + grace_s
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
        process.join(1.0)
    manager = getattr(pool, "_executor_manager_thread", None)  # the shutdown forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    if manager is None:
        return
    manager.join(MANAGER_STUCK_S)  # it lets go of the queues once it sees the workers gone
    if manager.is_alive() and results is not None and \
            not any(p.is_alive() for p in processes):
        # A worker stopped in the middle of sending its result leaves the manager thread
        # reading the rest of a message that never comes, and the interpreter's exit
        # waits for that thread. With the workers gone this process holds the last write
        # end of their result pipe: closing it ends that read (EOFError: a broken pool).
        # Only then: closed while the manager was still tearing the pool down on its own,
        # it left a semaphore behind in 1 of 6 runs of a nested-pool signals test.
        results._writer.close()
    manager.join(STOP_GRACE_S)

@dataclass(frozen=True)
class WorkerPool:
    """A process pool whose submits start its workers with the signals held back.

    A pool starts a worker on a submit; each submit is therefore one worker start as far
    as Ctrl-C and SIGTERM go (``_workers_starting``).
    """

    pool: Any

    def submit(self, func: Callable[..., Any], *args: Any) -> Any:
        """``func(*args)`` in a worker; its Future."""
        with _workers_starting():
            return self.pool.submit(func, *args)

    def submit_all(self, func: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``func(item)`` for every item, in workers; their Futures, in order."""
        with _workers_starting():
            return [self.pool.submit(func, item) for item in items]


@contextmanager
def worker_pool(workers: int, preload: str | Sequence[str]) -> Iterator[WorkerPool]:
    """A pool of ``workers`` processes (``pool_context``) for the block; stopped on any error.

    On an error or interrupt in the block its workers are stopped (SIGTERM, then SIGKILL
    after the grace); their temporary files, below one directory, are removed either way.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import util

    temp_root = tempfile.mkdtemp(prefix="cann-diff-w-")
    pool = None
    try:
        with _workers_starting():
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(preload),
                                       initializer=_start_worker,
                                       initargs=(temp_root, _grace_s / 2, util.get_temp_dir()))
            _pools.append(pool)
        yield WorkerPool(pool)
        pool.shutdown()
    except BaseException:
        if pool is not None:
            kill_pool(pool, _grace_s)  # the workers of this pool only
        raise
    finally:
        if pool in _pools:
            _pools.remove(pool)
        shutil.rmtree(temp_root, ignore_errors=True)

