"""Charts drawn by worker processes (and, if asked, this one), as each report is built.

Matplotlib-free until this process draws a chart itself: the names come from
``chart_list``. The command hands every chart out and draws none, so it never imports
matplotlib (≈ 0.55 s) unless a worker dies.
"""

from __future__ import annotations

import pickle
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future
from functools import partial
from typing import Any

from ..report.json_form import pickled
from ..report.model import Report
from .chart_list import wanted


class ChartWorkers:
    """A report's charts drawn by worker processes and this one together.

    ``offer`` queues a report's charts as soon as it is built; ``workers`` of them at a
    time are handed to the workers of ``pool`` (anything with ``submit``, as a
    ``concurrent.futures`` executor has), first chart first, the next each time one is
    drawn: they draw while this process compares the next candidate. ``images`` then draws
    here, from the last one back, every chart of the report not handed out yet, and waits
    for the ones that were: the two meet wherever the workers' speed puts them. One chart
    per worker at a time, as a pool would queue a second one ahead, which this process
    could then neither draw nor cancel. A chart a worker could not draw because the pool
    broke (a worker killed) is drawn here; a PNG is the same wherever it was drawn.

    With ``draw_here`` False this process draws no chart while the pool works: ``images``
    waits for the workers (as many as the cores, then), so that this process never imports
    matplotlib; only what a broken pool leaves is drawn here. The candidates summary's
    chart then goes through the same queue (``offer_summary``), behind the reports'.

    The queue's lock is never held across a call into the pool: the pool's result thread
    runs ``_drawn`` holding the pool's own lock on some Python versions.
    """

    def __init__(self, pool: Any, workers: int = 1, draw_here: bool = True) -> None:
        self.pool = pool
        self.workers = workers
        self.draw_here = draw_here
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a chart handed out, or a stop
        # {id(report): (the report, its pickle, {chart handed out: its PNG to come, None:
        # to draw here})}; the report (or the candidates summary) is held so that its id
        # is not another's meanwhile.
        self._offered: dict[int, tuple[Any, bytes, dict[str, Future]]] = {}
        self._queue: deque[tuple[int, str]] = deque()  # (id(report), chart) not handed out
        self._out = 0  # charts handed out and not drawn yet
        self._stopped = False  # the pool takes no more: what is queued is drawn here

    def offer(self, report: Report) -> None:
        """Queue the charts of ``report`` for the workers (once)."""
        self._queue_up(report, wanted(report))

    def offer_summary(self, summary: Any) -> None:
        """Queue the candidates summary's chart behind every chart offered so far (once).

        Offered before the reports are written, it goes to the first worker left without
        a report's chart, instead of waiting for the last report to be written.
        """
        if not self.draw_here:
            self._queue_up(summary, [_SUMMARY])

    def _queue_up(self, item: Any, names: list[str]) -> None:
        if id(item) in self._offered:
            return
        blob = pickled(item)
        with self._lock:
            self._offered[id(item)] = (item, blob, {})
            self._queue.extend((id(item), name) for name in names)
        self._hand_out()

    def _hand_out(self) -> None:
        while True:
            with self._lock:
                if self._stopped or self._out >= self.workers or not self._queue:
                    return
                key, name = self._queue.popleft()
                _, blob, charts = self._offered[key]
                png: Future = Future()
                charts[name] = png
                self._out += 1
                self._changed.notify_all()
            try:
                future = self.pool.submit(draw_summary_pickled, blob) if name == _SUMMARY \
                    else self.pool.submit(draw_pickled, blob, name)
            except Exception:  # noqa: BLE001 (shut down or broken: the rest is drawn here)
                self._done(png, None, stop=True)
                return
            future.add_done_callback(partial(self._drawn, png))

    def _done(self, png: Future, value: bytes | None, stop: bool = False,
              error: BaseException | None = None) -> None:
        with self._lock:
            self._out -= 1
            self._stopped = self._stopped or stop
            self._changed.notify_all()
        if error is None:
            png.set_result(value)
        else:
            png.set_exception(error)

    def _drawn(self, png: Future, future: Any) -> None:
        """A handed-out chart is done: its PNG, then the next chart. Never raises."""
        if future.cancelled():  # the pool is being stopped: the run ends
            self._done(png, None, stop=True)
            return
        error = future.exception()
        if isinstance(error, BrokenExecutor):  # a worker died: this process draws it
            self._done(png, None, stop=True)
        elif error is not None:  # a chart that fails: the report fails with it
            self._done(png, None, stop=True, error=error)
        else:
            self._done(png, future.result())
            self._hand_out()

    def images(self, report: Report) -> dict[str, bytes]:
        """The charts of ``report`` (offered first if it was not), as ``chart_images``."""
        self.offer(report)
        return self._collect(report, wanted(report), lambda name: _png(report, name))

    def summary_images(self, summary: Any) -> dict[str, bytes]:
        """The candidates summary's chart (``candidates.candidates_images``).

        Drawn by a worker (offered now if ``offer_summary`` did not) unless this process
        draws too or the pool is broken.
        """
        from .candidates import candidates_images

        if self.draw_here:
            return candidates_images(summary)
        self.offer_summary(summary)
        return self._collect(summary, [_SUMMARY], lambda _: candidates_images(summary))[_SUMMARY]

    def _collect(self, item: Any, names: list[str], draw: Callable[[str], Any]
                 ) -> dict[str, Any]:
        """Each of ``names`` of the offered ``item``, drawn here or by a worker.

        ``draw(name)`` here for those not handed out (from the last one back) and for those
        a dead worker lost; the worker's result for the others.
        """
        key = id(item)
        here = {}
        if not self.draw_here:  # until the workers hold every chart, or the pool stopped
            with self._changed:
                self._changed.wait_for(lambda: self._stopped or all(
                    k != key for k, _ in self._queue))
        for name in reversed(names):
            with self._lock:
                mine = (key, name) in self._queue
                if mine:
                    self._queue.remove((key, name))
            if mine:
                here[name] = draw(name)
        with self._lock:
            _, _, handed = self._offered.pop(key)
        for name in names:
            if name not in here:
                drawn = handed[name].result()
                here[name] = draw(name) if drawn is None else drawn
        return {name: here[name] for name in names}


# The queue's name of the candidates summary's one task: it draws all of its charts.
_SUMMARY = "candidates summary"


# The report a worker last unpickled, with its bytes: the charts of one report come in
# one after another with the same bytes.
_unpickled: tuple[bytes, Report] | None = None


def draw_pickled(blob: bytes, name: str) -> bytes:
    """In a worker: the chart ``name`` of the report pickled in ``blob``, as PNG bytes."""
    global _unpickled
    if _unpickled is None or _unpickled[0] != blob:
        _unpickled = (blob, pickle.loads(blob))
    return _png(_unpickled[1], name)


def _png(report: Report, name: str) -> bytes:
    from . import charts  # matplotlib: imported once this process draws

    return charts.png_bytes(charts.figure_of(name)(report))


def draw_summary_pickled(blob: bytes) -> dict[str, bytes]:
    """In a worker: the chart of the candidates summary pickled in ``blob``."""
    from .candidates import candidates_images

    return candidates_images(pickle.loads(blob))
