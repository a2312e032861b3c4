"""step_timeline.png: the median step of base and new, one above the other, one time axis.

What MindStudio Insight shows side by side, in one picture a ticket can hold: lanes for
the host, compute, communication and each HCCL plane, time from the step's start (its
ProfilerStep when it comes first). Exposed communication (no compute under it) and Free
(no task on the device) are shaded across the lanes; the five names whose drawn time
changed most between the runs are labelled at their longest segment, in the gap above its
lane (never over a bar; a name that would cover a more-changed one is left out). The
readers merge a lane's intervals to about 2,000 segments, so a large trace is sampled, not
drawn event by event. 1,400 px wide; Okabe-Ito colours with a legend whose swatches are
the shading's own colours and opacity.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .. import format as fmt
from ..report.model import LaneSegment, Report, StepLanes

DPI = 100
WIDTH_IN = 14.0  # 1,400 px
# Okabe & Ito (2008): distinct for the common colour deficiencies.
COLOURS = {"host": "#009E73", "compute": "#0072B2", "communication": "#D55E00",
           "plane": "#E69F00"}
EXPOSED, FREE = "#D55E00", "#999999"
# The shading's opacity, in the picture and in its legend swatch alike.
EXPOSED_ALPHA, FREE_ALPHA = 0.12, 0.22
SHADING = "shading"  # the gid of the shaded spans: a background a name may sit on, not a bar
LABELLED = 5
LABEL_CHARS = 28
LABEL_SIZE = 8  # points, at most: smaller when the gap between lanes is narrower
# A lane's bars fill the middle half of its row; the gap above them holds the names, so
# that no name covers a bar of the lane above (each row is 1 unit high).
BAR_HALF = 0.25
LABEL_LIFT = 0.27  # the names' baseline above the lane's centre
ROW_IN = 0.34  # inches per lane and panel


def _lanes(lanes: StepLanes) -> list[str]:
    """Lane names in drawing order, top to bottom: host, compute, communication, planes."""
    names = {s.lane for s in lanes.segments if s.lane != "free"}
    planes = sorted((n for n in names if n.startswith("plane ")),
                    key=lambda n: int(n.split()[1]) if n.split()[1].isdigit() else 0)
    return [n for n in ("host", "compute", "communication") if n in names] + planes


def _intervals(segments: list[LaneSegment]) -> np.ndarray:
    return np.array([(s.start_us, s.end_us) for s in segments], dtype=float).reshape(-1, 2)


def _exposed(comm: np.ndarray, compute: np.ndarray) -> list[tuple[float, float]]:
    """Parts of the communication intervals that no compute interval covers."""
    if not len(comm):
        return []
    order = np.argsort(compute[:, 0]) if len(compute) else np.zeros(0, dtype=int)
    compute = compute[order]
    out = []
    for start, end in comm:  # lanes are merged: at most a few thousand segments
        cursor = start
        first = np.searchsorted(compute[:, 1], start) if len(compute) else 0
        for c0, c1 in compute[first:]:
            if c0 >= end:
                break
            if c0 > cursor:
                out.append((cursor, c0))
            cursor = max(cursor, c1)
        if cursor < end:
            out.append((cursor, end))
    return out


def _changed_names(lanes: tuple[StepLanes, ...]) -> list[str]:
    """The LABELLED names whose drawn time changed most between the runs."""
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"base": 0.0, "new": 0.0})
    for side in lanes:
        for s in side.segments:
            if s.label and s.lane != "free":
                totals[s.label][side.side] += s.end_us - s.start_us
    ranked = sorted(totals, key=lambda n: (-abs(totals[n]["new"] - totals[n]["base"]), n))
    return ranked[:LABELLED]


def _draw_side(ax, side: StepLanes, names: list[str], span: float,
               labelled: list[str]) -> list:
    """One run's panel; returns the name labels drawn (most changed first)."""
    by_lane: dict[str, list[LaneSegment]] = defaultdict(list)
    for s in side.segments:
        by_lane[s.lane].append(s)
    rows = len(names)
    bottom, top = -0.5, rows - 1 + LABEL_LIFT + 2 * BAR_HALF  # room for the top lane's names
    spans = [(s.start_us / 1000, (s.end_us - s.start_us) / 1000) for s in by_lane["free"]]
    ax.broken_barh(spans, (bottom, top - bottom), facecolors=FREE, alpha=FREE_ALPHA,
                   linewidth=0, gid=SHADING)
    exposed = _exposed(_intervals(by_lane.get("communication", [])),
                       _intervals(by_lane.get("compute", [])))
    ax.broken_barh([(a / 1000, (b - a) / 1000) for a, b in exposed], (bottom, top - bottom),
                   facecolors=EXPOSED, alpha=EXPOSED_ALPHA, linewidth=0, gid=SHADING)
    for row, name in enumerate(names):
        y = rows - 1 - row
        colour = COLOURS["plane"] if name.startswith("plane ") else COLOURS[name]
        spans = [(s.start_us / 1000, max(s.end_us - s.start_us, span * 2e-4) / 1000)
                 for s in by_lane[name]]
        ax.broken_barh(spans, (y - BAR_HALF, 2 * BAR_HALF), facecolors=colour, linewidth=0)
    texts = []
    for label in labelled:  # once per panel, at its longest segment in any lane
        mine = [(s.end_us - s.start_us, names.index(s.lane), s) for s in side.segments
                if s.label == label and s.lane in names]
        if mine:
            _, row, longest = max(mine, key=lambda m: (m[0], -m[1]))
            texts.append(ax.text((longest.start_us + longest.end_us) / 2000,
                                 rows - 1 - row + LABEL_LIFT,
                                 fmt.clip(fmt.visible(label), LABEL_CHARS), ha="center",
                                 va="bottom", fontsize=LABEL_SIZE, color="#222222"))
    ax.set_yticks(range(rows), list(reversed(names)))
    ax.set_ylim(bottom, top)
    step = f", step {side.step}" if side.step is not None else ""
    ax.set_title(f"{side.side}: rank {side.rank}{step} (median step)", loc="left", fontsize=10)
    ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
    ax.set_axisbelow(True)
    return texts


def _place_labels(fig, ax, texts: list) -> None:
    """Keep each name inside its panel, inside the gap above its lane, off the others.

    Measured once the figure is laid out: a name too tall for the gap is set smaller, one
    reaching past an edge is moved in, and one that would cover the label of a name that
    changed more (drawn before it) is left out.
    """
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    low, high = ax.get_ylim()
    gap = (1 - LABEL_LIFT - BAR_HALF) * box.height / (high - low) - 1  # px between lanes
    placed: list = []  # window extents of the names kept
    for text in texts:
        extent = text.get_window_extent(renderer)
        if extent.height > gap:
            text.set_fontsize(LABEL_SIZE * gap / extent.height)
            extent = text.get_window_extent(renderer)
        shift = max(0.0, box.x0 - extent.x0) - max(0.0, extent.x1 - box.x1)
        if shift:
            x, y = ax.transData.transform(text.get_position())
            text.set_position(ax.transData.inverted().transform((x + shift, y)))
            extent = text.get_window_extent(renderer)
        if any(extent.overlaps(other) for other in placed):
            text.remove()
        else:
            placed.append(extent)


def step_timeline_figure(report: Report) -> Figure:
    """The figure: one panel per run with lanes, base above new, a shared time axis."""
    lanes = report.step_lanes
    names = list(dict.fromkeys(n for side in lanes for n in _lanes(side)))
    span = max((s.end_us for side in lanes for s in side.segments), default=1.0)
    rows = max(len(names), 1)
    fig = Figure(figsize=(WIDTH_IN, 1.2 + 2 * (0.55 + ROW_IN * rows)), dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(lanes), 1, sharex=True, squeeze=False)[:, 0]
    labelled = _changed_names(lanes)
    texts = [_draw_side(ax, side, names, span, labelled) for ax, side in zip(axes, lanes)]
    axes[-1].set_xlabel("ms from the step's start")
    axes[-1].set_xlim(0, span / 1000 * 1.01)
    legend = [Patch(color=COLOURS[k], label=k if k != "plane" else "HCCL plane tasks")
              for k in ("host", "compute", "communication", "plane")
              if any(n == k or n.startswith(f"{k} ") for n in names)]
    legend += [Patch(facecolor=EXPOSED, alpha=EXPOSED_ALPHA, linewidth=0,
                     label="exposed communication"),
               Patch(facecolor=FREE, alpha=FREE_ALPHA, linewidth=0, label="Free (device idle)")]
    fig.legend(handles=legend, loc="upper right", ncols=len(legend), frameon=False,
               fontsize=9)
    fig.suptitle("One step, base above new", x=0.01, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    for ax, drawn in zip(axes, texts):
        _place_labels(fig, ax, drawn)
    return fig
