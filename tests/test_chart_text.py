"""Chart text a reader can read, and legends and series that tell the truth.

Every chart of the shipped example, of a several-candidates summary and (with
../shared) of the real text and db Level1 pairs is drawn and measured, as laid out in the
PNG: no tick label in raw mathtext (``$\\mathdefault{10^{1}}$``, what a symlog axis gives
with ``text.parse_math`` off) and no two tick labels of an axis on each other; no text past
the figure's edge; no value or name label outside its axes, over a bar or over another
label; every legend swatch styled as the bars (face colour with its alpha, hatch) or lines
(colour, line style) it stands for, and every bar and labelled line explained by one. The
memory chart draws the measure and component the memory sentence names, inside its frame,
with the figures the profiler wrote (read here with pandas and sqlite3).
"""

from __future__ import annotations

import shutil
import sqlite3
from itertools import combinations
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import DATA, REALDATA, ROOT, needs_realdata
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from profiles import memory_report

from cann_diff.pipeline import diff, diff_candidates
from cann_diff.read import read_memory
from cann_diff.render import charts
from cann_diff.render.chart_list import wanted
from cann_diff.report import build_candidates_summary

BASE_PAIRS = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch"
NEW_PAIRS = REALDATA / "Ascend__msinsight/test/data/pytorch"
SHADING = "shading"  # timeline_chart's gid of the shaded spans: background, not bars
PIXEL = 1.0  # tolerance of every measure, px


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def example(example_report):
    return example_report


@pytest.fixture(scope="module")
def real_text():
    return diff(BASE_PAIRS / "text/level1", NEW_PAIRS / "text/level1").report


@pytest.fixture(scope="module")
def real_db():
    return diff(BASE_PAIRS / "db/level1", NEW_PAIRS / "db/level1").report


# --------------------------------------------------------------------------- measuring


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _overlap(a, b) -> bool:
    """Two window extents share more than a pixel each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > PIXEL
            and min(a.y1, b.y1) - max(a.y0, b.y0) > PIXEL)


def _inside(inner, outer) -> bool:
    return (inner.x0 >= outer.x0 - PIXEL and inner.x1 <= outer.x1 + PIXEL
            and inner.y0 >= outer.y0 - PIXEL and inner.y1 <= outer.y1 + PIXEL)


def _bars(ax) -> list[tuple[object, tuple, str | None]]:
    """(window extent, face RGBA, hatch) of every bar: rectangles and lane segments."""
    found = [(p.get_window_extent(), tuple(p.get_facecolor()), p.get_hatch())
             for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]
    for collection in ax.collections:
        if not isinstance(collection, PolyCollection) or collection.get_gid() == SHADING:
            continue
        face = tuple(collection.get_facecolor()[0])
        transform = collection.get_transform()
        found += [(path.get_extents(transform), face, collection.get_hatch())
                  for path in collection.get_paths()]
    return found


def _styles(ax) -> set[tuple]:
    """The looks of the bars, shading included: what a legend swatch may show."""
    looks = {(_rgba(face), hatch or None) for _, face, hatch in _bars(ax)}
    return looks | {(_rgba(c.get_facecolor()[0]), c.get_hatch() or None)
                    for c in ax.collections
                    if isinstance(c, PolyCollection) and c.get_gid() == SHADING}


def _rgba(colour) -> tuple:
    return tuple(round(v, 3) for v in to_rgba(colour))


def _line_look(line: Line2D) -> tuple:
    return _rgba(line.get_color()), line.get_linestyle()


def _tick_labels(axis) -> list[Text]:
    """The tick labels drawn: of ticks inside the axis' view (a locator makes more)."""
    low, high = sorted(axis.get_view_interval())
    ticks = [*axis.get_major_ticks(), *axis.get_minor_ticks()]
    return [label for tick in ticks if low - 1e-12 <= tick.get_loc() <= high + 1e-12
            for label in (tick.label1, tick.label2) if _shown(label)]


def problems(fig) -> list[str]:
    """Everything unreadable or untrue in ``fig``'s text and legends, as laid out."""
    fig.canvas.draw()
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks())
             for t in (tick.label1, tick.label2)}
    drawn = [t for t in fig.findobj(Text) if _shown(t) and id(t) not in ticks]
    drawn += [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for t in _tick_labels(axis)]
    found = [f"past the figure's edge: {t.get_text()!r}" for t in drawn
             if not _inside(t.get_window_extent(), fig.bbox)]
    for ax in fig.axes:
        found += _tick_problems(ax) + _label_problems(ax)
    return found + _legend_problems(fig)


def _tick_problems(ax) -> list[str]:
    found = []
    for axis in (ax.xaxis, ax.yaxis):
        labels = _tick_labels(axis)
        found += [f"mathtext tick label {t.get_text()!r}" for t in labels if "$" in t.get_text()]
        found += [f"tick labels on each other: {a.get_text()!r}, {b.get_text()!r}"
                  for a, b in combinations(labels, 2)
                  if _overlap(a.get_window_extent(), b.get_window_extent())]
    return found


def _label_problems(ax) -> list[str]:
    """Value and name labels (``ax.texts``): inside the axes, off every bar, apart."""
    texts = [t for t in ax.texts if _shown(t)]
    box = ax.get_window_extent()
    found = [f"outside its axes: {t.get_text()!r}" for t in texts
             if not _inside(t.get_window_extent(), box)]
    bars = [extent for extent, _, _ in _bars(ax)]
    found += [f"over a bar: {t.get_text()!r}" for t in texts
              if any(_overlap(t.get_window_extent(), bar) for bar in bars)]
    found += [f"labels on each other: {a.get_text()!r}, {b.get_text()!r}"
              for a, b in combinations(texts, 2)
              if _overlap(a.get_window_extent(), b.get_window_extent())]
    return found


def _legend_problems(fig) -> list[str]:
    """Each swatch styled as the bars or lines it explains, and each explained by one."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    if not legends:
        return []
    handles = [h for legend in legends for h in legend.legend_handles]
    swatches = {(_rgba(h.get_facecolor()), h.get_hatch() or None) for h in handles
                if isinstance(h, Rectangle)}
    keyed = {_line_look(h) for h in handles if isinstance(h, Line2D)}
    drawn = set().union(*(_styles(ax) for ax in fig.axes))
    lines = {_line_look(line) for ax in fig.axes for line in ax.lines
             if not line.get_label().startswith("_")}
    return ([f"legend swatch unlike any bar: {s}" for s in sorted(swatches - drawn)]
            + [f"bar without its legend swatch: {s}" for s in sorted(drawn - swatches)]
            + [f"legend line unlike any line: {k}" for k in sorted(keyed - lines)]
            + [f"line without its legend entry: {k}" for k in sorted(lines - keyed)])


def every_chart(report) -> dict[str, list[str]]:
    """{chart name: its problems} for every chart the report has."""
    return {name: problems(charts.FIGURES[name](report)) for name in wanted(report)}


# --------------------------------------------------------------------------- every chart


@pytest.mark.slow
def test_every_chart_of_the_example_reads_cleanly(example):
    found = every_chart(example)
    assert set(found) >= {"step_breakdown", "step_waterfall", "top_movers", "step_timeline"}
    assert {name: p for name, p in found.items() if p} == {}


@pytest.mark.slow
@needs_realdata
def test_every_chart_of_the_real_text_pair_reads_cleanly(real_text):
    found = every_chart(real_text)
    assert {"top_movers", "step_timeline", "memory"} <= set(found)
    assert {name: p for name, p in found.items() if p} == {}


@pytest.mark.slow
@needs_realdata
def test_every_chart_of_the_real_db_pair_reads_cleanly(real_db):
    found = every_chart(real_db)
    assert {"top_movers", "step_timeline", "memory"} <= set(found)
    assert {name: p for name, p in found.items() if p} == {}


@pytest.mark.slow
def test_the_candidates_chart_reads_cleanly():
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        results = diff_candidates("examples/cann7.0.1.3",
                                  ["examples/cann8.0.RC2", "examples/cann8.0.RC2-mc2"])
    summary = build_candidates_summary([r.report for r in results], ["a", "b"], [None, None])
    assert problems(charts.candidates_figure(summary)) == []


def test_the_checks_catch_what_users_saw():
    """The measures fail on the faults users reported: raw mathtext ticks, a label over a
    bar, a grey swatch for an orange bar."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.barh([0, 1], [100.0, 1.0], facecolor="#D55E00", alpha=0.45, hatch="///")
    ax.set_xscale("symlog", linthresh=0.1)
    ax.text(0.5, 0, "Reduce_Inline over the bar", va="center")
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, facecolor="#999999", alpha=0.45,
                                      hatch="///", label="~ not significant")])
    found = problems(fig)
    assert any(p.startswith("mathtext tick label '$") for p in found)
    assert any(p.startswith("over a bar: 'Reduce_Inline") for p in found)
    assert any(p.startswith("legend swatch unlike any bar") for p in found)
    assert any(p.startswith("bar without its legend swatch") for p in found)


# --------------------------------------------------------------------------- top movers


@needs_realdata
def test_symlog_ticks_are_plain_powers_of_ten(real_db):
    # db L1: AllReduce +72.75 ms against the next key's 1.95 ms: symlog.
    fig = charts.top_movers_figure(real_db)
    fig.canvas.draw()
    ax = fig.axes[0]
    assert ax.get_xscale() == "symlog"
    shown = {t.get_text(): t.get_position()[0] for t in ax.get_xticklabels() if _shown(t)}
    assert shown["0"] == 0 and shown["1"] == 1 and shown["10"] == 10 and shown["100"] == 100
    assert all(float(text.replace("−", "-").replace(",", "")) == x for text, x in shown.items())


@needs_realdata
def test_the_not_significant_bar_and_its_swatch_look_alike(real_db):
    allreduce = next(op for op in charts.movers(real_db) if op.op_type == "AllReduce")
    assert allreduce.status == "not-significant" and allreduce.delta_us > 0
    fig = charts.top_movers_figure(real_db)
    ax = fig.axes[0]
    bar = ax.patches[[op.op_type for op in charts.movers(real_db)].index("AllReduce")]
    swatch = next(h for h, t in zip(fig.legends[0].legend_handles, fig.legends[0].texts)
                  if "not significant" in t.get_text())
    assert fig.legends[0].texts[0].get_text() == "slower, ~ not significant"
    assert _rgba(swatch.get_facecolor()) == _rgba(bar.get_facecolor()) \
        == _rgba((*to_rgba(charts.SLOWER)[:3], 0.45))
    assert swatch.get_hatch() == bar.get_hatch() == "///"


# --------------------------------------------------------------------------- memory


def _panels(fig) -> dict[str, object]:
    """Memory panels by the first line of their title (``Peak <measure> … (<component>)``)."""
    return {ax.get_title().split("\n")[0]: ax for ax in fig.axes}


def _series_top(ax, colour: str) -> float:
    """The largest value the solid line of ``colour`` draws."""
    return max(max(line.get_ydata()) for line in ax.lines
               if line.get_linestyle() == "-" and _rgba(line.get_color()) == _rgba(colour))


def _peaks_inside_the_frame(ax) -> bool:
    """Every line's highest point lies below the axes' top by more than a few pixels."""
    box = ax.get_window_extent()
    tops = [ax.transData.transform((0, max(line.get_ydata())))[1] for line in ax.lines]
    return all(top < box.y1 - 5 for top in tops)


def test_memory_chart_draws_both_peaks_of_the_tiny_real_ranks():
    """tests/data/memory, rank 1 (2023) as base and rank 0 as new: each panel's series top
    is the memory_record.csv peak of its measure and component."""
    records = {side: pd.read_csv(DATA / "memory" / rank / "ASCEND_PROFILER_OUTPUT"
                                 / "memory_record.csv")
               for side, rank in (("base", "test_rank_1"), ("new", "test_rank_0"))}
    report = memory_report(read_memory(DATA / "memory" / "test_rank_1"),
                           read_memory(DATA / "memory" / "test_rank_0"))
    fig = charts.memory_figure(report)
    assert problems(fig) == []
    panels = _panels(fig)
    assert set(panels) == {"Peak reserved device memory (APP)",
                           "Peak allocated device memory (PTA+GE)"}
    for title, component, column in (
            ("Peak reserved device memory (APP)", "APP", "Total Reserved(MB)"),
            ("Peak allocated device memory (PTA+GE)", "PTA+GE", "Total Allocated(MB)")):
        ax = panels[title]
        for side, colour in (("base", charts.BASE), ("new", charts.NEW)):
            frame = records[side]
            assert _series_top(ax, colour) == frame.loc[frame["Component"] == component,
                                                        column].max()
        assert _peaks_inside_the_frame(ax) and ax.get_ylim()[0] == 0


def _db_copy(rank_dir: Path, into: Path) -> Path:
    """The rank's profiler db (with its -wal) copied, so that sqlite3 may open it."""
    found = next((rank_dir / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler*.db"))
    into.mkdir(parents=True)
    for part in found.parent.glob(found.name + "*"):
        shutil.copy(part, into / part.name)
    return into / found.name


def _db_peak(db: Path, component: str) -> float:
    """max(totalAllocated) of a MEMORY_RECORD component, MB (MiB)."""
    with sqlite3.connect(db) as connection:
        (value,) = connection.execute(
            "SELECT max(m.totalAllocated) FROM MEMORY_RECORD m JOIN STRING_IDS s "
            "ON s.id = m.component WHERE s.value = ?", (component,)).fetchone()
    return value / 2**20


@needs_realdata
def test_memory_chart_shows_the_peak_the_headline_names(real_db, tmp_path):
    """db L1: peak reserved (APP) −0.8 %, peak allocated (PTA+GE) +7.0 %: the sentence names
    the allocated peak, and the chart draws it with the profiler's figures."""
    memory = real_db.memory
    assert memory.headline.startswith("Peak allocated device memory (PTA+GE) rose")
    expected = {side: max(_db_peak(_db_copy(root / f"rank{r}_ascend_pt",
                                            tmp_path / side / str(r)), "PTA+GE")
                          for r in (0, 1))
                for side, root in (("base", BASE_PAIRS / "db/level1"),
                                   ("new", NEW_PAIRS / "db/level1"))}
    fig = charts.memory_figure(memory)
    ax = _panels(fig)["Peak allocated device memory (PTA+GE)"]
    assert _series_top(ax, charts.BASE) == pytest.approx(expected["base"], abs=1e-6)
    assert _series_top(ax, charts.NEW) == pytest.approx(expected["new"], abs=1e-6)
    change = (expected["new"] - expected["base"]) / expected["base"] * 100
    assert f"({change:+.1f} %)" in ax.get_title()
    fig.canvas.draw()
    assert all(_peaks_inside_the_frame(panel) for panel in fig.axes)


@needs_realdata
def test_memory_json_carries_the_allocated_timeline(real_db):
    timeline = real_db.memory.to_dict()["timeline"]
    allocated = timeline["allocated"]
    assert allocated["component"] == "PTA+GE" and timeline["component"] == "APP"
    assert allocated["base"]["rank"] == real_db.memory.peak_allocated.base_rank
    assert max(allocated["new"]["allocated_mb"]) == real_db.memory.peak_allocated.new_mb
    assert len(allocated["base"]["time_ms"]) == len(allocated["base"]["allocated_mb"])


def test_thinning_keeps_each_measures_peak():
    """5,000 PTA+GE samples 1 ms apart: reserved climbs (each time bucket's largest is its
    last sample), allocated peaks at 4,321 MB on the first sample of a bucket (t = 2,500
    ms), which thinning by reserved alone would drop."""
    import numpy as np

    from cann_diff.read.formats.memory_files import HBM_COLUMNS, MODULE_COLUMNS, OPERATOR_COLUMNS
    from cann_diff.read.reduce.device_memory import summarize_memory
    from cann_diff.schema import MAX_POINTS, memory_frame

    n = 5000
    allocated = np.full(n, 1000.0)
    allocated[2500] = 4321.0
    records = pd.DataFrame({"component": "PTA+GE", "time_us": np.arange(n) * 1000.0,
                            "allocated_mb": allocated, "reserved_mb": 2000.0 + np.arange(n)})
    empty = [memory_frame(columns, ranked=False)
             for columns in (OPERATOR_COLUMNS, MODULE_COLUMNS, HBM_COLUMNS)]
    timeline = summarize_memory(records, *empty).timelines
    assert len(timeline) <= MAX_POINTS
    assert timeline["allocated_mb"].max() == 4321.0
    assert timeline.loc[timeline["allocated_mb"].idxmax(), "time_ms"] == 2500.0
    assert timeline["reserved_mb"].max() == 2000.0 + n - 1


# --------------------------------------------------------------------------- step timeline


@needs_realdata
def test_timeline_names_sit_between_lanes_inside_their_panel(real_db):
    """The db pair's new step: Reduce_Inline (plane 5) sat on plane 4's bars."""
    fig = charts.FIGURES["step_timeline"](real_db)
    fig.canvas.draw()
    names = {t.get_text() for ax in fig.axes for t in ax.texts if _shown(t)}
    assert "Reduce_Inline" in names and "AllReduce" in names
    assert all(_label_problems(ax) == [] for ax in fig.axes)

