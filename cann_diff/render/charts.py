"""PNG charts drawn from a Report: fixed size and DPI, Agg backend, deterministic.

Charts a reviewer can trust at a glance:

* every value axis starts at zero (a +8 % step is drawn as +8 %, not as 2×);
* colours from the Okabe-Ito palette, safe for colour-blind readers and in grey print:
  base sky blue, new orange; slower vermillion, faster blue; each with a legend;
* the status rules hold in the pictures too: only ``regressed``/``improved`` keys are
  drawn slower/faster at full colour; ``not-significant`` keys (``~`` in the tables) light
  and hatched, ``untested`` ones light and dotted; keys the rules never call slower or
  faster (added, removed, reshaped, count-changed, unchanged) neutral grey with their word;
* one bar ten times the next would flatten every other: the axis is then symlog, its
  decades labelled as plain numbers (``1``, ``10``, ``100``);
* the per-rank heatmap's scale is fixed (±20 %), values beyond it clipped and labelled;
* every label sits on the bar or line it names, inside the axes (the limits make room for
  it) and over no other bar; legends sit outside the data, and list the looks drawn, each
  swatch styled as its bars (face colour, alpha, hatch);
* the memory chart draws both peaks the table and the memory sentence speak of: reserved
  and allocated, each of its own component, inside the frame;
* no chart without data: ``draw_charts`` leaves a chart out (and the report says why)
  rather than draw an empty frame.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.image  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, StrMethodFormatter  # noqa: E402

from .. import format as fmt  # noqa: E402
from ..report.model import (  # noqa: E402
    CandidatesSummary,
    Memory,
    MemorySeries,
    OperatorRow,
    PeakChange,
    Report,
)
from ..schema import PIPES  # noqa: E402
from .chart_list import (  # noqa: E402,F401 (has_rank_change, movers: the charts' own tests)
    WANTED,
    has_rank_change,
    movers,
    pipe_movers,
    rank_grid,
    ranks_to_draw,
)
from .files import write_bytes_atomic, write_images  # noqa: E402
from .timeline_chart import step_timeline_figure  # noqa: E402
from .why_section import BOUND_WORDS, PIPE_LABELS  # noqa: E402

DPI = 100
SIZE = (9, 4.5)
# Okabe & Ito (2008), "Color Universal Design": distinct for the common colour deficiencies.
BASE, NEW = "#56B4E9", "#E69F00"  # sky blue, orange
SLOWER, FASTER = "#D55E00", "#0072B2"  # vermillion, blue
GREY, INK = "#999999", "#222222"
STACK = (("computing", "Computing", "#0072B2"),
         ("communication_not_overlapped", "Exposed communication", "#D55E00"),
         ("free", "Free", "#BBBBBB"),
         ("bubble", "Bubble", "#CC79A7"))
NOT_SIGNIFICANT: dict[str, Any] = {"alpha": 0.45, "hatch": "///"}
UNTESTED: dict[str, Any] = {"alpha": 0.45, "hatch": "..."}
NEUTRAL = "#BBBBBB"
# Statuses drawn in the slower/faster colours; the rest are never called slower or faster.
SPEED_STYLES: dict[str, dict[str, Any]] = {"regressed": {}, "improved": {},
                                           "not-significant": NOT_SIGNIFICANT,
                                           "untested": UNTESTED}
HEATMAP_LIMIT_PCT = 20.0  # the heatmap's fixed scale: ±20 %, beyond it clipped
# No mathtext: a name from a profile is drawn as written (``Cost $5 and $6``), never parsed
# (``$\undefinedmacro{x}$`` would stop the run).
plt.rcParams.update({"svg.hashsalt": "cann-diff", "font.size": 10, "hatch.linewidth": 0.6,
                     "text.parse_math": False})
MEMORY_SIZE = (8.0, 4.0)  # inches; with DPI 100 → 800 × 400 px
MARKER_MAX_POINTS = 60
NO_SHAPES = "* no input shapes recorded: the operator is keyed by its type alone"


# PNG metadata: "Software" left out (None drops a key matplotlib would write).
NO_SOFTWARE: dict[str, Any] = {"Software": None}


def png_bytes(fig) -> bytes:
    """The figure as PNG bytes, laid out and drawn in one pass; the figure is closed.

    ``savefig`` draws a figure with a layout engine twice (once to lay it out, once to
    paint it); ``canvas.draw`` lays out and paints in the same pass, and the pixels and
    the file are the same. No "Software" metadata: the bytes stay the same across
    matplotlib versions.
    """
    try:
        fig.canvas.draw()
        out = io.BytesIO()
        matplotlib.image.imsave(out, fig.canvas.buffer_rgba(), format="png", origin="upper",
                                dpi=DPI, metadata=NO_SOFTWARE)
        return out.getvalue()
    finally:
        plt.close(fig)


def _save(fig, path: Path) -> Path:
    return write_bytes_atomic(path, png_bytes(fig))


LABEL_WIDTH = 34  # characters per line of a run's label in a legend
LABEL_LINES = 3


def short(label: str, width: int = LABEL_WIDTH, lines: int = LABEL_LINES) -> str:
    """A run label for a legend, wrapped: at most ``lines`` lines of ``width``.

    The middle is cut when longer, so that two labels that differ anywhere still differ;
    the tables and report.json keep the whole label.
    """
    label = fmt.visible(label)
    if len(label) > width * lines:
        keep = width * lines - 1
        label = label[:keep // 2] + "…" + label[-(keep - keep // 2):]
    return "\n".join(label[i:i + width] for i in range(0, len(label), width))


def _ms(us: float | None) -> float:
    """µs → ms; NaN when unknown (NaN bars are not drawn)."""
    return math.nan if us is None or us != us else us / 1000


def fit_texts(fig, ax, texts: list) -> None:
    """Widen the x limits of ``ax`` just enough that every label in ``texts`` lies inside.

    A value label sits beside its bar, in data coordinates, but its width is in pixels: no
    fixed margin fits every label on every scale (a symlog decade is a few dozen pixels).
    The figure is laid out once to measure each label's reach past its anchor; the limits
    then follow, in the scale's own coordinates (where pixels are linear), as the smallest
    span ``s`` with ``max(high, anchor + right·s) − min(low, anchor − left·s) ≤ s`` (reach
    as a fraction of the axes' width, 2 px spare), found by fixed-point iteration.
    """
    import numpy as np

    if not texts:
        return
    fig.draw_without_rendering()  # the layout engine places the axes; their width is kept
    width = ax.get_window_extent().width
    anchors_px = ax.transData.transform([text.get_position() for text in texts])[:, 0]
    extents = [text.get_window_extent() for text in texts]
    right = (np.maximum([e.x1 for e in extents] - anchors_px, 0) + 2) / width
    left = (np.maximum(anchors_px - [e.x0 for e in extents], 0) + 2) / width
    if right.max() + left.max() >= 1:  # labels wider than the axes: nothing fits
        return
    scale = ax.xaxis.get_transform()
    low, high = scale.transform(ax.get_xlim())
    anchors = scale.transform([text.get_position()[0] for text in texts])
    span = high - low
    for _ in range(50):  # the slopes are below 1: converges, ~10 steps to 1e-9
        start = min(low, float((anchors - left * span).min()))
        needed = max(high, float((anchors + right * span).max())) - start
        if needed <= span * (1 + 1e-9):
            break
        span = needed
    ax.set_xlim(scale.inverted().transform([start, start + span]))


# --------------------------------------------------------------------------- step


def _stack(report: Report) -> list[tuple[str, str, str]]:
    """The breakdown fields either run recorded as non-zero."""
    breakdown = report.step.breakdown
    return [(key, name, colour) for key, name, colour in STACK
            if any(v for v in (breakdown.get(key).base_us, breakdown.get(key).new_us)
                   if v == v)]


def step_breakdown_figure(report: Report):
    """Stacked bars of the step (Stage) per run: computing, exposed communication, free."""
    breakdown = report.step.breakdown
    labels = [f"base\n{short(report.base.label, 24)}", f"new\n{short(report.new.label, 24)}"]
    fig, ax = plt.subplots(figsize=(SIZE[0], 3.2), layout="constrained")
    left = [0.0, 0.0]
    for key, name, colour in _stack(report):
        figure = breakdown.get(key)
        values = [_ms(figure.base_us), _ms(figure.new_us)]
        values = [v if v == v else 0.0 for v in values]
        ax.barh(labels, values, left=left, color=colour, label=name, edgecolor="white",
                linewidth=0.5)
        left = [a + b for a, b in zip(left, values)]
    for y, total in enumerate(left):
        ax.text(total, y, f"  {total:,.1f} ms", va="center")
    ax.set_xlabel("ms per step (mean over steps and ranks)")
    ax.set_title("Step time breakdown")
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.18 if max(left) > 0 else 1)
    fig.legend(loc="outside lower center", ncols=4, fontsize=9, frameon=False)
    return fig


def waterfall_figure(report: Report):
    """Where the step time went: base step, Δ per breakdown field, new step; from zero."""
    breakdown = report.step.breakdown
    base, new = _ms(report.step.base_us), _ms(report.step.new_us)
    base, new = (0.0 if v != v else v for v in (base, new))
    steps = [(name, _ms(breakdown.get(key).delta_us)) for key, name, _ in _stack(report)
             if breakdown.get(key).delta_us is not None]
    fig, ax = plt.subplots(figsize=SIZE, layout="constrained")
    names = ["base step", *[f"Δ {n.lower()}" for n, _ in steps], "new step"]
    scale = max(base, new, 1e-9)
    ax.bar(0, base, color=BASE, edgecolor=INK, linewidth=0.5)
    ax.text(0, base, f"{base:,.2f}", ha="center", va="bottom")
    level = base
    for i, (_, delta) in enumerate(steps, start=1):
        ax.plot([i - 1.4, i + 0.4], [level, level], color=GREY, linewidth=0.8, linestyle=":")
        top = max(level, level + delta)
        if abs(delta) < scale * 1e-3:  # no bar to see: mark the level the label belongs to
            top = level
            ax.plot([i - 0.4, i + 0.4], [level, level], color=INK, linewidth=1.5)
        else:
            ax.bar(i, delta, bottom=level, color=SLOWER if delta > 0 else FASTER,
                   edgecolor=INK, linewidth=0.5)
        ax.text(i, top, f"{delta:+,.2f}", ha="center", va="bottom")
        level += delta
    last = len(steps) + 1
    ax.plot([last - 1.4, last - 0.4], [level, level], color=GREY, linewidth=0.8, linestyle=":")
    ax.bar(last, new, color=NEW, edgecolor=INK, linewidth=0.5)
    ax.text(last, new, f"{new:,.2f}", ha="center", va="bottom")
    ax.set_ylim(0, max(base, new, level) * 1.12 or 1)
    # Wrapped, not slanted: slanted names of neighbouring bars run into each other.
    ax.set_xticks(range(len(names)), [textwrap.fill(name, 14) for name in names], fontsize=9)
    ax.set_ylabel("ms per step (axis from 0)")
    ax.set_title(f"Where the step time went (mean step {report.step.delta_pct:+.1f}%)"
                 if report.step.delta_pct is not None else "Where the step time went")
    handles = [Patch(color=BASE, label=f"base: {short(report.base.label)}"),
               Patch(color=NEW, label=f"new: {short(report.new.label)}")]
    drawn = {bar.get_facecolor() for bar in ax.patches}  # a swatch for each bar drawn
    handles += [Patch(color=colour, label=label) for colour, label in (
        (SLOWER, "adds time (slower)"), (FASTER, "saves time (faster)"))
        if to_rgba(colour) in drawn]
    fig.legend(handles=handles, loc="outside right upper", fontsize=9, frameon=False)
    return fig


# --------------------------------------------------------------------------- operators


def _label(op: OperatorRow) -> str:
    shapes = op.input_shapes or ("(other shapes)" if op.base_input_shapes
                                 or op.new_input_shapes else "*")
    shapes = shapes if len(shapes) <= 28 else shapes[:27] + "…"
    tag = "" if op.status in ("regressed", "improved") else f" [{op.status}]"
    return f"{fmt.clip(fmt.visible(op.op_type), 32)} {fmt.visible(shapes)}{tag}"


# What a top-movers bar means, as its legend says it, in the legend's order.
SLOWER_WORD, FASTER_WORD = "slower", "faster"
STATUS_WORDS = {"not-significant": "~ not significant", "untested": "untested (too few instances)"}
NEVER_CALLED = ("grey: [added, removed, reshaped, count-changed, unchanged], never called "
                "slower or faster")
LEGEND_ORDER = tuple([SLOWER_WORD, FASTER_WORD]
                     + [f"{word}, {status}" for status in STATUS_WORDS.values()
                        for word in (SLOWER_WORD, FASTER_WORD)] + [NEVER_CALLED])
BAR_EDGE: dict[str, Any] = {"edgecolor": INK, "linewidth": 0.4}


def _bar_style(op: OperatorRow, delta: float) -> tuple[str, dict[str, Any]]:
    """The legend entry and the look of one key's bar, as the status rules allow."""
    if op.status not in SPEED_STYLES:
        return NEVER_CALLED, {"facecolor": NEUTRAL, **BAR_EDGE}
    word = SLOWER_WORD if delta > 0 else FASTER_WORD
    entry = f"{word}, {STATUS_WORDS[op.status]}" if op.status in STATUS_WORDS else word
    return entry, {"facecolor": SLOWER if delta > 0 else FASTER, **BAR_EDGE,
                   **SPEED_STYLES[op.status]}


def _needs_symlog(deltas: list[float]) -> bool:
    """One bar more than ten times the next: a linear axis would hide every other bar."""
    sizes = sorted((abs(d) for d in deltas if d == d), reverse=True)
    return len(sizes) >= 2 and sizes[1] > 0 and sizes[0] > 10 * sizes[1]


def _delta_text(ms: float) -> str:
    return f"{ms * 1000:+,.1f} µs" if abs(ms) < 0.1 else f"{ms:+,.2f} ms"


def _symlog_ticks(low: float, high: float, linthresh: float) -> list[float]:
    """0 and the powers of ten past the linear part inside [low, high].

    Every other power when there are more than eight, so that no two labels touch.
    """
    import numpy as np

    first = math.ceil(math.log10(linthresh))
    last = math.floor(math.log10(max(abs(low), abs(high), linthresh)))
    decades = 10.0 ** np.arange(first, last + 1)
    decades = decades[::-1][::2][::-1] if len(decades) > 8 else decades
    return sorted([0.0, *decades[decades <= high], *(-decades[-decades >= low])])


def plain_number(value: float, _position: Any = None) -> str:
    r"""A power of ten (or 0) as a plain tick label: ``−10``, ``0.1``, ``1,000``.

    A symlog axis labels its decades in mathtext (``$\mathdefault{10^{1}}$``), which
    ``text.parse_math`` off prints as written.
    """
    if value == 0:
        return "0"
    size = abs(value)
    digits = 0 if size >= 1 else -math.floor(math.log10(size))
    return ("−" if value < 0 else "") + f"{size:,.{digits}f}"


def top_movers_figure(report: Report, n: int = 12):
    """Horizontal bars of the operators whose time per step moved most (Δ ms).

    The MC2 fusion section's rows (``OperatorRow.fusion``) are left out, as in the tables;
    ``~`` rows (not significant) are light and hatched; ``*`` marks keys without shapes.
    The legend lists the looks drawn, each swatch styled as its bars are.
    """
    rows = movers(report, n)
    fig, ax = plt.subplots(figsize=(SIZE[0], max(3.0, 0.42 * len(rows) + 1.8)),
                           layout="constrained")
    deltas = [op.delta_us / 1000 for op in rows]
    looks: dict[str, dict[str, Any]] = {}
    labels = []
    for y, (op, delta) in enumerate(zip(rows, deltas)):
        entry, look = _bar_style(op, delta)
        looks.setdefault(entry, look)
        ax.barh(y, delta, **look)
        labels.append(ax.text(delta, y, f" {_delta_text(delta)} ", va="center",
                              ha="left" if delta >= 0 else "right", fontsize=8))
    ax.set_yticks(range(len(rows)), [_label(op) for op in rows])
    ax.axvline(0, color=INK, linewidth=0.8)
    ax.invert_yaxis()
    low, high = min(0.0, *deltas), max(0.0, *deltas)
    if _needs_symlog(deltas):
        second = sorted((abs(d) for d in deltas), reverse=True)[1]
        linthresh = max(second / 10, 1e-6)
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_xlim(low if low < 0 else -linthresh, high if high > 0 else linthresh)
        ax.xaxis.set_major_formatter(plain_number)
        scale = "symlog: one bar > 10× the next"
    else:
        ax.set_xlim(low - 0.02 * ((high - low) or 1.0), high + 0.02 * ((high - low) or 1.0))
        scale = "linear"
    ax.set_xlabel(f"Δ ms per step, new − base ({scale})")
    ax.set_title("Top movers")
    handles = [Patch(label=entry, **looks[entry]) for entry in LEGEND_ORDER if entry in looks]
    notes = [note for note, shown in (
        (NO_SHAPES, any(not (op.input_shapes or op.base_input_shapes or op.new_input_shapes)
                        for op in rows)),
        ("MC2 fused / split operators are in the MC2 fusion section, not here",
         any(op.fusion or op.base_claimed or op.new_claimed for op in report.operators)))
        if shown]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=9,
               frameon=False, title="\n".join(notes) or None, title_fontsize=8)
    fit_texts(fig, ax, labels)
    if ax.get_xscale() == "symlog":
        ax.xaxis.set_major_locator(FixedLocator(_symlog_ticks(*ax.get_xlim(), linthresh)))
    return fig


# --------------------------------------------------------------------------- pipes


PIPE_COLUMNS = 2  # panels per row of the pipes chart: room for seven pipe names each


def _pipe_ratios(op: OperatorRow) -> tuple[list[str], list[float], list[float]]:
    """The pipes both sides of ``op`` record, and their ratios (0-1) on each side."""
    attributes = op.attributes or {}  # pipe_movers picks rows with attributes only
    base, new = (attributes[side]["pipes"] for side in ("base", "new"))
    pipes = [p for p in PIPES if base.get(p) is not None and new.get(p) is not None]
    return pipes, [float(base[p]) for p in pipes], [float(new[p]) for p in pipes]


def _bound_text(op: OperatorRow) -> str:
    """``memory-bound`` or ``memory-bound → MTE3-bound`` (the pipe of the largest ratio)."""
    bound = op.bound or {}
    words = [BOUND_WORDS[b] for b in (bound.get("base"), bound.get("new")) if b]
    return " → ".join(dict.fromkeys(words))


def pipes_figure(report: Report):
    """Per top mover with pipe ratios on both sides, base vs new bars per pipe, from 0.

    A ratio is the pipe's PMU busy time over the kernel time (duration-weighted over the
    key's kernels, compare/attributes.py): one panel per key, largest |Δ| first, each
    titled with the key, its Δ and its bound. A pipe one side does not record (no
    fixpipe on a 910A) is left out of the key's panel, never drawn as 0.
    """
    import numpy as np

    rows = pipe_movers(report)
    columns = min(PIPE_COLUMNS, len(rows))
    lines = math.ceil(len(rows) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(SIZE[0], 1.4 + 2.2 * lines),
                             layout="constrained", squeeze=False)
    left_out: set[str] = set()
    for ax, op in zip(axes.flat, rows):
        pipes, base, new = _pipe_ratios(op)
        left_out |= {PIPE_LABELS[p] for p in PIPES if p not in pipes}
        x = np.arange(len(pipes))
        ax.bar(x - 0.2, base, 0.4, color=BASE, **BAR_EDGE)
        ax.bar(x + 0.2, new, 0.4, color=NEW, **BAR_EDGE)
        ax.set_xticks(x, [PIPE_LABELS[p] for p in pipes], fontsize=8)
        ax.set_ylim(0, max(1.0, *base, *new))
        ax.set_yticks([0, 0.5, 1], ["0", "0.5", "1"], fontsize=8)
        ax.grid(axis="y", linewidth=0.3)
        ax.set_axisbelow(True)
        bound = _bound_text(op)
        ax.set_title(f"{fmt.clip(_label(op), 56)}\n"
                     f"Δ {_delta_text(_ms(op.delta_us))}" + (f" · {bound}" if bound else ""),
                     fontsize=9)
    for ax in axes.flat[len(rows):]:
        fig.delaxes(ax)
    fig.supylabel("pipe busy / kernel time (ratio)", fontsize=9)
    fig.suptitle("Pipe ratios of the top movers, base vs new", fontsize=11)
    handles = [Patch(facecolor=colour, **BAR_EDGE, label=f"{side}: {short(run.label)}")
               for side, run, colour in (("base", report.base, BASE),
                                         ("new", report.new, NEW))]
    note = (f"a pipe one side does not record is left out of its panel "
            f"({', '.join(sorted(left_out))})" if left_out else None)
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=9,
               frameon=False, title=note, title_fontsize=8)
    return fig


def draw_pipes(report: Report, path: Path) -> Path:
    """Write the pipes chart (``pipes_figure``) to ``path``."""
    return _save(pipes_figure(report), path)


# --------------------------------------------------------------------------- ranks


ANNOTATE_MAX_RANKS = 16


def rank_heatmap_figure(report: Report):
    """Ranks × metrics, colour = Δ% new vs base (the 64 ranks that moved most).

    Diverging blue (lower) to red (higher), centred on 0; hatched cells have no Δ% (the
    rank is in one run only, or its base is 0); a metric without any Δ% is left out.
    """
    import numpy as np

    fields, ranks, grid = rank_grid(report)
    fig, ax = plt.subplots(figsize=(SIZE[0], 1.4 + 0.45 * len(fields)), layout="constrained")
    limit = HEATMAP_LIMIT_PCT  # fixed, so that +5.9 % and +171 % do not look alike
    ax.set_facecolor("#EEEEEE")
    ax.patch.set_hatch("xx")
    ax.patch.set_edgecolor("#BBBBBB")
    image = ax.imshow(np.clip(grid, -limit, limit), cmap="RdBu_r", vmin=-limit, vmax=limit,
                      aspect="auto")
    for (i, j), value in np.ndenumerate(grid):  # every cell when few, else the clipped
        if value == value and (len(ranks) <= ANNOTATE_MAX_RANKS or abs(value) > limit):
            ax.text(j, i, f"{value:+.0f}%" if abs(value) > limit else f"{value:+.1f}%",
                    ha="center", va="center", fontsize=8 if len(ranks) <= 32 else 6,
                    color="white" if abs(value) > 0.6 * limit else INK)
    ax.set_yticks(range(len(fields)), [name for _, name in fields])
    step = max(1, len(ranks) // 32)
    ax.set_xticks(range(0, len(ranks), step), [str(r.rank) for r in ranks][::step])
    ax.set_xlabel("rank (hatched: no Δ% — the rank is in one run only, or its base is 0)")
    clipped = bool((np.abs(grid[np.isfinite(grid)]) > limit).any())
    bar = fig.colorbar(image, ax=ax, extend="both" if clipped else "neither",
                       label=f"Δ% new vs base, ±{limit:g} %" + (" (clipped)" if clipped
                                                                else ""))
    bar.ax.tick_params(labelsize=8)
    ax.set_title("Per-rank change")
    return fig


def rank_steps_figure(report: Report):
    """Step time per rank, base vs new (the 64 ranks that moved most); legend above."""
    import numpy as np

    ranks = ranks_to_draw(report)
    x = np.arange(len(ranks))
    fig, ax = plt.subplots(figsize=SIZE, layout="constrained")
    for offset, prefix, side, colour in ((-0.2, "base", report.base, BASE),
                                         (0.2, "new", report.new, NEW)):
        values = [_ms(getattr(r, f"{prefix}_stage")) for r in ranks]
        ax.bar(x + offset, values, width=0.4, color=colour, label=f"{prefix}: {short(side.label)}")
    step = max(1, len(ranks) // 32)
    ax.set_xticks(x[::step], [str(r.rank) for r in ranks][::step])
    ax.set_xlabel("rank")
    ax.set_ylabel("ms per step")
    ax.set_ylim(bottom=0)
    ax.set_title("Step time per rank")
    fig.legend(loc="outside upper right", ncols=2, fontsize=9, frameon=False)
    return fig


# --------------------------------------------------------------------------- families


def families_figure(report: Report):
    """Kernel time per compute family, base vs new bars from zero, Δ beside each pair."""
    import numpy as np

    rows = report.families
    y = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(SIZE[0], max(2.6, 0.55 * len(rows) + 1.4)),
                           layout="constrained")
    base = [_ms(f.base_total_us) for f in rows]
    new = [_ms(f.new_total_us) for f in rows]
    ax.barh(y - 0.2, base, height=0.4, color=BASE, label=f"base: {short(report.base.label)}")
    ax.barh(y + 0.2, new, height=0.4, color=NEW, label=f"new: {short(report.new.label)}")
    for i, f in enumerate(rows):
        top = max(base[i], new[i])
        ax.text(top, i, f"  Δ {_delta_text(_ms(f.delta_us))}", va="center", fontsize=8)
    ax.set_yticks(y, [f.family for f in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(max(base), max(new), 1e-3) * 1.3)
    ax.set_xlabel("kernel time per step, ms (sum of kernel durations)")
    ax.set_title("Kernel time by compute family")
    fig.legend(loc="outside lower center", ncols=2, fontsize=9, frameon=False)
    return fig


def draw_step_breakdown(report: Report, path: Path) -> Path:
    """Write the step breakdown chart (``step_breakdown_figure``) to ``path``."""
    return _save(step_breakdown_figure(report), path)


def draw_waterfall(report: Report, path: Path) -> Path:
    """Write the waterfall (``waterfall_figure``) to ``path``."""
    return _save(waterfall_figure(report), path)


def draw_top_movers(report: Report, path: Path, n: int = 12) -> Path:
    """Write the top movers chart (``top_movers_figure``) to ``path``."""
    return _save(top_movers_figure(report, n), path)


def draw_rank_heatmap(report: Report, path: Path) -> Path:
    """Write the per-rank heatmap (``rank_heatmap_figure``) to ``path``."""
    return _save(rank_heatmap_figure(report), path)


def draw_rank_steps(report: Report, path: Path) -> Path:
    """Write the step-per-rank chart (``rank_steps_figure``) to ``path``."""
    return _save(rank_steps_figure(report), path)


def draw_families(report: Report, path: Path) -> Path:
    """Write the compute-family chart (``families_figure``) to ``path``."""
    return _save(families_figure(report), path)


# --------------------------------------------------------------------------- candidates


def candidates_figure(summary: CandidatesSummary):
    """Stacked bars of the step per run, baseline first: computing, exposed comm, free."""
    first = summary.candidates[0]
    labels = [f"{short(summary.base.label)} (base)",
              *[short(c.label) for c in summary.candidates]]
    parts = (("computing", "Computing", STACK[0][2]),
             ("exposed_communication", "Exposed communication", STACK[1][2]),
             ("free", "Free", STACK[2][2]))
    fig, ax = plt.subplots(figsize=(SIZE[0], 1.6 + 0.55 * len(labels)), layout="constrained")
    left = [0.0] * len(labels)
    for attr, name, colour in parts:
        values = [_ms(getattr(first, attr).base_us),
                  *[_ms(getattr(c, attr).new_us) for c in summary.candidates]]
        values = [0.0 if v != v else v for v in values]
        ax.barh(labels, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values)]
    for y, total in enumerate(left):
        ax.text(total, y, f"  {total:,.1f} ms", va="center")
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.2 if max(left) > 0 else 1)
    ax.set_xlabel("ms per step (mean over steps and ranks)")
    ax.set_title("Step time per candidate")
    fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize=9)
    return fig


def draw_candidates(summary: CandidatesSummary, path: Path) -> Path:
    """Write the step-per-candidate chart (``candidates_figure``) to ``path``."""
    return _save(candidates_figure(summary), path)


def ladder_figure(summary):
    """The step along a ladder: a stacked bar per profile, each rung's moved parts marked.

    Bars: computing, exposed communication and Free of each profile as its rung's step
    table shows it; the Stage (step) figure beside each bar. Between two bars, the parts
    the rung's verdict names as causes, with their Δ (ms): the rung that moved each part.
    """
    labels = [short(label) for label in summary.labels]
    fig, ax = plt.subplots(figsize=(SIZE[0], 2.0 + 0.8 * len(labels)), layout="constrained")
    left = [0.0] * len(labels)
    for key, name, colour in STACK[:3]:
        values = [_ms(parts.get(key)) for parts in summary.parts]
        values = [0.0 if v != v else v for v in values]
        ax.barh(labels, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values)]
    stages = [_ms(parts.get("stage")) for parts in summary.parts]
    for y, (total, stage) in enumerate(zip(left, stages)):
        text = f"  {stage:,.2f} ms" if stage == stage else ""
        ax.text(total, y, text, va="center")
    widest = max(left) if max(left) > 0 else 1.0
    for rung in summary.rungs:
        moved = "\n".join(f"rung {rung.index}: {fmt.visible(c.name)} "
                           f"{fmt.ms(c.delta_us, signed=True)} ms" for c in rung.causes)
        if moved:  # between the rung's two bars, at the right: what this rung moved
            ax.annotate(moved, xy=(widest * 1.02, rung.index - 0.5), va="center",
                        fontsize=8, color="#333333", annotation_clip=False)
    ax.invert_yaxis()
    ax.set_xlim(0, widest * 1.55)
    ax.set_xlabel("ms per step (mean over steps and ranks)")
    ax.set_title("Step time along the upgrade path")
    fig.legend(loc="outside lower center", ncols=3, frameon=False, fontsize=9)
    return fig



# --------------------------------------------------------------------------- memory


def _memory_panels(comparison: Memory) -> list[tuple[PeakChange, MemorySeries, MemorySeries]]:
    """(peak, base series, new series) of each measure compared: reserved, then allocated."""
    panels = [(comparison.peak_reserved, comparison.base_timeline, comparison.new_timeline),
              (comparison.peak_allocated, comparison.base_allocated_timeline,
               comparison.new_allocated_timeline)]
    return [(peak, base, new) for peak, base, new in panels
            if peak is not None and (base.time_ms or new.time_ms)]


def _memory_panel(axes, peak: PeakChange, base: MemorySeries, new: MemorySeries) -> None:
    """One measure: each run's series on the rank holding its peak, the peaks dashed."""
    column = f"{peak.measure}_mb"
    for side, series, top, colour in (("base", base, peak.base_mb, BASE),
                                      ("new", new, peak.new_mb, NEW)):
        if not series.time_ms:
            continue
        # Markers on short series: a timeline whose samples share one timestamp (a
        # spreadsheet-mangled file) would otherwise draw nothing.
        marker = "o" if len(series.time_ms) <= MARKER_MAX_POINTS else None
        axes.plot(series.time_ms, getattr(series, column), drawstyle="steps-post",
                  color=colour, linewidth=1.5, marker=marker, markersize=3, label=side)
        axes.axhline(top, color=colour, linestyle="--", linewidth=0.8, label=f"{side} peak")
    # Room above the higher peak, so that neither line sits on the frame.
    axes.set_ylim(0, max(peak.base_mb, peak.new_mb) * 1.15 or 1.0)
    change = "" if peak.delta_pct is None else f" ({peak.delta_pct:+.1f} %)"
    axes.set_title(f"Peak {peak.measure} device memory ({fmt.visible(peak.component)})\n"
                   f"{peak.base_mb:,.1f} → {peak.new_mb:,.1f} MB{change}; "
                   f"rank {peak.base_rank} → {peak.new_rank}", fontsize=9)
    axes.set_xlabel("ms since the rank's first sample")
    axes.set_ylabel(f"{peak.measure} MB (axis from 0)")
    axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    axes.grid(True, linewidth=0.3)


def memory_figure(comparison: Memory) -> Figure:
    """Device memory (MB) over ms since each run's first sample: one panel per peak.

    The panels are the peaks of the table and of the memory sentence: reserved (what runs
    out first) and allocated (what the framework used), each of its own component, on the
    rank holding each run's peak. Both runs start at 0 so that their shapes line up; the
    axis starts at 0 MB so that a few MB on gigabytes look like what they are; the dashed
    lines mark each run's peak, with room above the higher one.
    """
    figure = Figure(figsize=MEMORY_SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    panels = _memory_panels(comparison)
    if not panels:
        axes = figure.add_subplot(1, 1, 1)
        axes.text(0.5, 0.5, "no memory samples", ha="center", va="center",
                  transform=axes.transAxes)
        axes.set_ylim(bottom=0)
        axes.set_title("Device memory")
        return figure
    for column, (peak, base, new) in enumerate(panels, start=1):
        _memory_panel(figure.add_subplot(1, len(panels), column), peak, base, new)
    # One legend for the panels: the first drawn line of each name stands for them all.
    handles: dict[str, Any] = {}
    for line in (line for axes in figure.axes for line in axes.lines):
        handles.setdefault(str(line.get_label()), line)
    names = [name for name in ("base", "new", "base peak", "new peak") if name in handles]
    figure.legend([handles[name] for name in names], names, loc="outside lower center",
                  ncols=4, fontsize="small", frameon=False)
    return figure


def draw_memory_chart(comparison: Memory, out_path: Path) -> Path:
    """Draw ``memory_figure`` into ``out_path`` (800 × 400 px); return ``out_path``."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(png_bytes(memory_figure(comparison)))
    return out_path


# --------------------------------------------------------------------------- all charts


def _memory_chart(report: Report) -> Figure:
    assert report.memory is not None
    return memory_figure(report.memory)


# Each chart's figure, by its name in chart_list.WANTED (which says when it is drawn).
FIGURES: dict[str, Callable[[Report], Any]] = {
    "step_breakdown": step_breakdown_figure, "step_waterfall": waterfall_figure,
    "top_movers": top_movers_figure, "pipes": pipes_figure,
    "rank_heatmap": rank_heatmap_figure,
    "rank_steps": rank_steps_figure, "families": families_figure,
    "step_timeline": step_timeline_figure, "memory": _memory_chart,
}
# The charts of a report, in order: (name, drawn when, figure). The name is the PNG's file
# name (``<name>.png``) and the key report.md and report.html link it by.
CHARTS: tuple[tuple[str, Callable[[Report], bool], Callable[[Report], Any]], ...] = tuple(
    (name, wanted, FIGURES[name]) for name, wanted in WANTED)


def _wanted(report: Report) -> list[tuple[str, Callable[[Report], Any]]]:
    return [(name, figure) for name, wanted, figure in CHARTS if wanted(report)]


def figure_of(name: str) -> Callable[[Report], Any]:
    """The figure function of the chart ``name`` (``CHARTS``)."""
    return next(figure for chart, _, figure in CHARTS if chart == name)


def chart_images(report: Report) -> dict[str, bytes]:
    """Every chart of ``CHARTS`` that has data, drawn here, as PNG bytes; {chart name: bytes}.

    ``chart_workers.ChartWorkers.images`` gives the same, drawn with worker processes.
    """
    return {name: png_bytes(figure(report)) for name, figure in _wanted(report)}


def draw_charts(report: Report, out_dir: Path,
                images: Mapping[str, bytes] | None = None) -> dict[str, Path]:
    """Write every chart that has data into ``out_dir``; returns {chart name: path}.

    ``images``: the charts already drawn (``chart_images``, in a worker process); None:
    drawn here.
    """
    out_dir = Path(out_dir)
    images = chart_images(report) if images is None else images
    return write_images(out_dir, images)
