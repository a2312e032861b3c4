"""Where reading runs: one Executor protocol, three executors, one planner by bytes.

Reading a rank is Python and pandas work that holds the interpreter lock most of the
time, so threads give no second core; processes do. An executor maps a function over
chunks of work and hands back the results in order, raising the first error a chunk
raised (errors pickle, ``errors.py``). One cost model (``read_cost_s``: a fixed cost per
rank plus one per byte of its files) plans every level: ``plan_read`` decides whether the
inputs themselves are read side by side in processes and how many jobs each then has
(``pipeline.read_sides``); ``plan_ranks`` decides, from the sizes of one input's rank
sources, ``--jobs`` and ``--scheduler``, whether its ranks are read here or in worker
processes (or on Dask) and how they are chunked: by cost, so that four large ranks use
the cores as a thousand small ones do.

The worker processes themselves (forkserver, signals, stopping) are ``processes.py``'s.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

# The planner's cost model lives outside this package, which imports pandas: the command
# line asks it whether reading will want worker processes before it imports anything.
# Its tunable bounds are read there (``costs.SIDE_PROCESS_MIN_S``, …), not re-exported.
from ..costs import (  # noqa: F401 (re-exported: the planner's tests read them here)
    READ_S_PER_BYTE,
    READ_S_PER_RANK,
    guess_sizes,
    path_bytes,
    read_cost_s,
    side_plan,
    spread_saves_s,
)
from ..errors import InputError
from ..processes import forkserver_started, start_forkserver, worker_pool
from ..settings import DEFAULT_LIMITS

# Chunks per worker: enough to amortize a task's round trip, few enough that the workers
# finish together and progress moves. A chunk's small ranks are reduced as one stack.
TASKS_PER_WORKER = 4
# Ranks per Dask task: a cluster's size is not known here, so its tasks are many and small.
DASK_CHUNK_RANKS = 16
Progress = Callable[[int, int], None]

# Work this process has to do anyway, run once by the first pool that waits on its workers
# (``while_workers_read``).
_waiting: list[Callable[[], None]] = []


@contextmanager
def while_workers_read(work: Callable[[], None]) -> Iterator[None]:
    """Within the block, the first pool to wait on its workers runs ``work`` first, once.

    A process pool or a Dask map runs it in this thread once its chunks are out. This
    process is idle while workers read: an import the caller needs next (scipy's
    distributions, ~0.2 s) costs no wall time there. Left undone when no pool runs: the
    caller then pays it where it needs it, as before.
    """
    _waiting.append(work)
    try:
        yield
    finally:
        if work in _waiting:
            _waiting.remove(work)


def _while_waiting() -> None:
    while _waiting:
        _waiting.pop(0)()


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
class Processes:
    """In ``jobs`` worker processes (forkserver) that import ``preload`` once.

    Once the chunks are submitted, this process does what it was given to do meanwhile
    (``while_workers_read``).
    """

    jobs: int
    preload: str = "cann_diff.read"

    def run(self, func, chunks, progress):
        """Run the chunks in a process pool; on any error or interrupt, stop its workers."""
        with worker_pool(max(1, min(self.jobs, len(chunks))), self.preload) as pool:
            return _in_order(pool.submit_all(func, chunks), progress)


def _in_order(futures: Sequence[Any], progress: Progress) -> list[Any]:
    """The results of ``futures`` in order, the first error raised.

    The chunks are out: this process first does its work meanwhile (``while_workers_read``);
    ``progress(done, total)`` follows each result.
    """
    _while_waiting()
    results = []
    for number, future in enumerate(futures, 1):
        results.append(future.result())
        progress(number, len(futures))
    return results


class SharedWorkers:
    """One pool of rank workers for every input read in a block (``shared_workers``).

    An input whose ranks go to processes (``Processes``) hands its chunks over here. A
    pool's first submit waits for the forkserver's imports. So when the forkserver was not
    started yet, it is started now and the chunks are queued: its imports run while this
    process finds the next input's ranks, and the queued chunks are submitted, in order,
    when the first results are asked for. When it was started before (by the command
    line, at its start: its imports have had this process's own imports' time), or a pool
    is running already, the chunks are submitted at once, and the workers read them while
    this process finds the next input's ranks. Either way the workers go on from one input
    to the next while this process assembles the one before. A worker that dies breaks
    the pool for every input not read yet: the run fails as it would have at that input,
    but the error comes at the first one still waiting.
    """

    def __init__(self, jobs: int, stack: ExitStack) -> None:
        self.jobs = jobs
        self.open = True
        self._stack = stack
        self._pool: Any = None
        self._queued: list[tuple[Callable[[Any], Any], Sequence[Any], list[Any]]] = []

    def queue(self, preload: str, func: Callable[[Any], Any],
              chunks: Sequence[Any]) -> Callable[[], list[Any]]:
        """Take ``func`` over ``chunks``; the function returned gives their Futures once.

        Submitted now or at the first collect (see the class). The Futures are handed
        over, not kept: an input's results are dropped here as soon as it has them, not
        held until the block ends.
        """
        at_once = self._pool is not None or forkserver_started()
        if not at_once and not self._queued:
            start_forkserver((preload,))
        futures: list[Any] = []
        self._queued.append((func, chunks, futures))
        if at_once:
            self._submit(preload)

        def submitted() -> list[Any]:
            self._submit(preload)
            handed = list(futures)
            futures.clear()
            return handed

        return submitted

    def _submit(self, preload: str) -> None:
        """Submit every queued chunk, in order, to the pool (started when there is none)."""
        if not self._queued:
            return
        if not self.open:  # its pool is gone: nothing would stop a new one
            raise RuntimeError("rank chunks collected after their shared_workers block ended")
        if self._pool is None:
            self._pool = self._stack.enter_context(worker_pool(self.jobs, preload))
        for queued_func, queued_chunks, out in self._queued:
            out.extend(self._pool.submit_all(queued_func, queued_chunks))
        self._queued.clear()


# The shared pool of the block this thread (context) is in, if any.
_shared: ContextVar[SharedWorkers | None] = ContextVar("shared_workers", default=None)


@contextmanager
def shared_workers(jobs: int) -> Iterator[None]:
    """Within the block, the rank chunks of ``start`` go to one pool of ``jobs`` workers.

    The pool is started when first needed and stopped at the end of the block: on an error
    or an interrupt its workers are stopped with whatever they still had queued. Only
    this thread's reads share it (a context variable): another thread reads as before.
    """
    with ExitStack() as stack:
        shared = SharedWorkers(jobs, stack)
        token = _shared.set(shared)
        try:
            yield
        finally:
            shared.open = False
            _shared.reset(token)


Collect = Callable[[Progress], list[Any]]


def start(executor: Executor, func: Callable[[Any], Any], chunks: Sequence[Any]) -> Collect:
    """``executor.run`` in two halves: the chunks handed out, the results when collected.

    Only chunks for worker processes inside ``shared_workers`` go to workers before they
    are collected (handed to the shared pool); any other executor runs them when its
    results are collected, as ``run`` does. Collecting runs what this process was given to
    do while workers read (``while_workers_read``), then returns the results in order,
    raising the first error.
    """
    shared = _shared.get()
    if shared is None or not isinstance(executor, Processes):
        return partial(executor.run, func, chunks)
    submitted = shared.queue(executor.preload, func, chunks)

    return lambda progress: _in_order(submitted(), progress)


SCHEDULER_SCHEMES = ("tcp", "tls", "inproc")
# Seconds the scheduler probe waits beyond ``--scheduler-timeout`` (see ``_identify``).
PROBE_MARGIN_S = 0.5
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.S)
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9_-]{1,63}(?<!-))*\.?")


def scheduler_address_problem(address: str) -> str | None:
    """What is wrong with a Dask scheduler address, or None when it is well-formed.

    Accepted: ``tcp://HOST:PORT``, ``tls://HOST:PORT``, ``HOST:PORT`` (tcp, as Dask takes
    it) and ``inproc://…`` (a scheduler in this process); HOST a name, an IPv4 address or
    an IPv6 one in brackets, PORT 1-65535. Checked before any connection is tried, so that
    a typo is one line at once rather than a connection attempt to nowhere.
    """
    expected = "expected tcp://HOST:PORT, tls://HOST:PORT or inproc://…"
    matched = _SCHEME.fullmatch(address)
    scheme, rest = (matched.group(1).lower(), matched.group(2)) if matched else ("tcp", address)
    if scheme not in SCHEDULER_SCHEMES:
        return f"{scheme}:// is not a Dask scheduler's scheme; {expected}"
    if scheme == "inproc":
        return None if rest else f"no address after inproc://; {expected}"
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"no port (1-65535) after the host; {expected}"
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
            return None
        except ValueError:
            return f"{host} is not an IPv6 address; {expected}"
    if not _HOST_NAME.fullmatch(host):
        return f"{host!r} is not a host name or IP address; {expected}"
    return None


def _identify(address: str, timeout_s: float, connection_args: dict) -> dict:
    """The ``identity`` a Dask server at ``address`` answers, within ``timeout_s`` seconds.

    Asked before a Client is made: distributed's Client waits without a limit for a server
    that accepts and never answers, reads an HTTP reply as a frame of exabytes
    (MemoryError), and when its start fails for anything but an OSError it leaves a loop
    that its ``__del__`` waits a minute for at exit. Here one connection is tried in a
    daemon thread with its own event loop (the caller may run one already), and given up
    after the timeout whatever it is doing. Raises InputError naming the address.
    """
    from distributed.comm import connect
    from distributed.core import send_recv

    async def ask() -> Any:
        comm = await connect(address, timeout=timeout_s, **connection_args)
        try:
            return await send_recv(comm, op="identity")
        finally:
            comm.abort()

    answer: dict[str, Any] = {}
    # A little beyond distributed's own connect timeout, so that a refused or unroutable
    # address is told by its own error ("cannot reach") rather than as silence.
    limit_s = timeout_s + PROBE_MARGIN_S

    def probe() -> None:
        try:
            answer["reply"] = asyncio.run(asyncio.wait_for(ask(), limit_s))
        # Whatever the bytes of a server that is not Dask's make distributed's decoder raise
        # (MemoryError, ValueError, TypeError, …) means the same: not a scheduler. The
        # thread hands the error over; the caller turns it into one InputError.
        except BaseException as exc:
            answer["error"] = exc

    thread = threading.Thread(target=probe, name="cann-diff-scheduler-probe", daemon=True)
    thread.start()
    thread.join(limit_s + PROBE_MARGIN_S)
    error = answer.get("error")
    if "reply" not in answer and (error is None or isinstance(error, TimeoutError)):
        raise InputError(None, f"Dask scheduler {address} did not answer within "
                               f"{timeout_s:g} s (--scheduler-timeout)")
    if isinstance(error, OSError):
        raise InputError(None, f"cannot reach Dask scheduler {address}: {error}")
    reply = answer.get("reply")
    if isinstance(reply, dict) and reply.get("type") == "Scheduler":
        return reply
    what = (f"a Dask {reply['type']}, not the scheduler" if isinstance(reply, dict)
            and isinstance(reply.get("type"), str) else "not a Dask scheduler: it does not "
            "answer in Dask's protocol")
    raise InputError(None, f"{address} is {what}; give the scheduler's address, e.g. "
                           "tcp://scheduler:8786")


@dataclass(frozen=True)
class Dask:
    """On an existing Dask cluster (the optional extra ``cann-diff[dask]``)."""

    address: str
    timeout_s: float

    def run(self, func, chunks, progress):
        """Map the chunks over the cluster's workers; on an interrupt, cancel them."""
        problem = scheduler_address_problem(self.address)
        if problem:
            raise InputError(None, f"--scheduler {self.address!r}: {problem}")
        try:
            from distributed import Client
            from distributed.security import Security
        except ImportError:
            raise InputError(None, "--scheduler needs Dask: pip install "
                                   "'cann-diff[dask]'") from None
        _identify(self.address, self.timeout_s, Security().get_connection_args("client"))
        try:
            client = Client(self.address, timeout=self.timeout_s, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError(None, f"cannot reach Dask scheduler {self.address}: "
                                   f"{exc}") from None
        futures = []
        try:
            futures = client.map(func, chunks, pure=False)
            return _in_order(futures, progress)
        except BaseException:
            if futures:
                client.cancel(futures)  # the cluster is shared: leave it no work of ours
            raise
        finally:
            client.close(timeout=self.timeout_s)


@dataclass(frozen=True)
class Plan:
    """An executor and the chunks of work it is given."""

    executor: Executor
    chunks: list[list[Any]]


def chunked_by_cost(items: Sequence[Any], costs: Sequence[float],
                    workers: int) -> list[list[Any]]:
    """``items`` in consecutive chunks of about equal cost, ``TASKS_PER_WORKER`` per worker.

    A rank costing more than a chunk's share is a chunk of its own; small ranks share one
    (and are stacked in it). The order is kept: results come back in the items' order.
    """
    share = sum(costs) / (max(workers, 1) * TASKS_PER_WORKER)
    chunks: list[list[Any]] = []
    current: list[Any] = []
    held = 0.0
    for item, cost in zip(items, costs):
        if current and held + cost > share * 1.5:  # it would overfill this chunk
            chunks.append(current)
            held, current = 0.0, []
        current.append(item)
        held += cost
        if held >= share:
            chunks.append(current)
            held, current = 0.0, []
    if current:
        chunks.append(current)
    return chunks


def plan_ranks(sources: Sequence[Any], jobs: int, scheduler: str | None, timeout_s: float,
               sizes: Sequence[int] | None = None, pool_min_s: float = 0.5) -> Plan:
    """How the rank sources of one input are read, from their sizes (bytes) and ``jobs``.

    On a Dask cluster in chunks of at most ``DASK_CHUNK_RANKS``; with ``jobs`` ≥ 2, when
    spreading the ranks over ``jobs`` worker processes saves more than ``pool_min_s`` wall
    seconds (``Limits.rank_pool_min_s``; by the cost model ``read_cost_s``), in processes,
    chunks of about equal cost (``chunked_by_cost``: a large rank alone, small ones
    together); else in this process, all in one chunk (its small ranks stack; pyarrow
    parses a large rank on all cores). ``sizes`` defaults to the bytes below each source's path.
    """
    if scheduler:
        return Plan(Dask(scheduler, timeout_s), chunked(sources, max(jobs, 1),
                                                        DASK_CHUNK_RANKS))
    if jobs <= 1 or len(sources) <= 1:
        return Plan(InOrder(), [list(sources)])
    if sizes is None:
        sizes = [path_bytes(source.path) for source in sources]
    costs = read_cost_s(sizes)
    if spread_saves_s(costs, jobs) <= pool_min_s:
        return Plan(InOrder(), [list(sources)])
    workers = min(jobs, len(sources))
    return Plan(Processes(workers), chunked_by_cost(sources, costs, workers))


@dataclass(frozen=True)
class ReadPlan:
    """Where the inputs are read, and with how many jobs each.

    ``side_workers`` processes (0: one input after the other, here); ``jobs``: what each
    input then has for its ranks (``plan_ranks``).
    """

    side_workers: int
    jobs: int


def plan_read(paths: Sequence[str | Path], jobs: int, scheduler: str | None,
              sizes_of: Callable[[str | Path], Sequence[int]] = guess_sizes,
              pool_min_s: float = DEFAULT_LIMITS.rank_pool_min_s) -> ReadPlan:
    """How the inputs are read, from the sizes of each input's ranks and ``jobs``.

    The inputs are read side by side in processes only with two inputs or more and no
    Dask scheduler (which spreads the ranks itself), as ``costs.side_plan`` decides on the
    sizes ``sizes_of`` gives (the quick look the command line also asked before it started
    the forkserver). Otherwise one input after the other here, each with all ``jobs``: a
    side of several large ranks spreads them over rank workers (``plan_ranks``), one large
    rank parses on all cores.
    """
    if jobs < 2 or scheduler or len(paths) < 2:
        return ReadPlan(0, jobs)
    return ReadPlan(*side_plan([sizes_of(path) for path in paths], jobs, pool_min_s))
