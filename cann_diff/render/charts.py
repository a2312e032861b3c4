"""PNG charts drawn from a Report: fixed size and DPI, Agg backend, deterministic."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import StrMethodFormatter  # noqa: E402

from ..compare.memory import MemoryComparison  # noqa: E402
from ..report import OperatorRow, RankRow, Report  # noqa: E402
from .files import write_atomic  # noqa: E402

DPI = 100
SIZE = (9, 4.5)
STACK = (("computing", "Computing", "#4C72B0"),
         ("communication_not_overlapped", "Exposed communication", "#DD8452"),
         ("free", "Free", "#BBBBBB"),
         ("bubble", "Bubble", "#8172B3"))
plt.rcParams.update({"svg.hashsalt": "cann-diff", "font.size": 10})
MEMORY_SIZE = (8.0, 4.0)  # inches; with DPI 100 → 800 × 400 px
MARKER_MAX_POINTS = 60


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    try:
        write_atomic(path, lambda temp: fig.savefig(temp, format="png", dpi=DPI,
                                                     metadata={"Software": None}))
    finally:
        plt.close(fig)
    return path


def draw_step_breakdown(report: Report, path: Path) -> Path:
    """Stacked bars of the step (Stage) per run: computing, exposed communication, free."""
    breakdown = report.step.breakdown
    labels = [report.base.label, report.new.label]
    fig, ax = plt.subplots(figsize=(SIZE[0], 3.2))
    left = [0.0, 0.0]
    for key, name, colour in STACK:
        figure = breakdown.get(key)
        values = [(figure.base_us or 0) / 1000, (figure.new_us or 0) / 1000]
        values = [v if v == v else 0.0 for v in values]
        ax.barh(labels, values, left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, values)]
    for y, total in enumerate(left):
        ax.text(total, y, f"  {total:,.1f} ms", va="center")
    ax.set_xlabel("ms per step (mean over steps and ranks)")
    ax.set_title("Step time breakdown")
    ax.invert_yaxis()
    ax.set_xlim(0, max(left) * 1.18 if max(left) > 0 else 1)
    ax.legend(loc="lower right", ncols=4, fontsize=8, frameon=False,
              bbox_to_anchor=(1.0, -0.45))
    return _save(fig, path)


def draw_waterfall(report: Report, path: Path) -> Path:
    """Where the step time went: base step, Δcomputing, Δexposed comm, Δfree, new step."""
    breakdown = report.step.breakdown
    base = (report.step.base_us or 0) / 1000
    new = (report.step.new_us or 0) / 1000
    steps = [(name, breakdown.get(key).delta_us / 1000)
             for key, name, _ in STACK if breakdown.get(key).delta_us is not None]
    fig, ax = plt.subplots(figsize=SIZE)
    names = [report.base.label, *[f"Δ {n.lower()}" for n, _ in steps], report.new.label]
    level = base
    ax.bar(0, base, color="#4C72B0")
    for i, (_, delta) in enumerate(steps, start=1):
        colour = "#C44E52" if delta > 0 else "#55A868"
        ax.bar(i, delta, bottom=level, color=colour)
        ax.text(i, level + max(delta, 0), f"{delta:+,.2f}", ha="center", va="bottom")
        level += delta
    ax.bar(len(steps) + 1, new, color="#4C72B0")
    for x, value in ((0, base), (len(steps) + 1, new)):
        ax.text(x, value, f"{value:,.2f}", ha="center", va="bottom")
    low = min(base, new, level) * 0.9
    high = max(base, new) * 1.05 + max((d for _, d in steps), default=0)
    ax.set_ylim(low, high)
    ax.set_xticks(range(len(names)), names, rotation=15, ha="right")
    ax.set_ylabel("ms per step")
    ax.set_title(f"Where the step time went ({report.step.delta_pct:+.1f}%)"
                 if report.step.delta_pct is not None else "Where the step time went")
    return _save(fig, path)


def draw_top_movers(report: Report, path: Path, n: int = 12) -> Path:
    """Horizontal bars of the operators whose time per step moved most (Δ ms)."""
    movers = [op for op in report.operators if op.delta_us == op.delta_us][:n]
    fig, ax = plt.subplots(figsize=(SIZE[0], max(3.0, 0.42 * len(movers) + 1.2)))
    labels = [_label(op) for op in movers]
    deltas = [op.delta_us / 1000 for op in movers]
    colours = ["#C44E52" if d > 0 else "#55A868" for d in deltas]
    ax.barh(labels, deltas, color=colours)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("Δ time per step, ms (new − base)")
    ax.set_title("Top movers")
    return _save(fig, path)


def _label(op: OperatorRow) -> str:
    shapes = op.input_shapes or "*"
    shapes = shapes if len(shapes) <= 28 else shapes[:27] + "…"
    tag = f" [{op.status}]" if op.status in ("added", "removed") else ""
    return f"{op.op_type} {shapes}{tag}"


HEATMAP_FIELDS = (("stage", "step"), ("computing", "computing"),
                  ("communication_not_overlapped", "exposed comm"), ("free", "free"),
                  ("wait_us", "comm wait"))
MAX_RANKS_DRAWN = 64


def _ranks_to_draw(report: Report) -> list[RankRow]:
    moved = sorted(report.ranks, key=lambda r: -abs(r.delta_stage_us or 0))
    return sorted(moved[:MAX_RANKS_DRAWN], key=lambda r: r.rank)


def draw_rank_heatmap(report: Report, path: Path) -> Path:
    """Ranks × metrics, colour = Δ% new vs base (the 64 ranks that moved most)."""
    import numpy as np

    ranks = _ranks_to_draw(report)
    fields = [(key, name) for key, name in HEATMAP_FIELDS
              if any(getattr(r, f"base_{key}") is not None for r in ranks)]
    grid = np.full((len(fields), len(ranks)), np.nan)
    for j, r in enumerate(ranks):
        for i, (key, _) in enumerate(fields):
            base, new = getattr(r, f"base_{key}"), getattr(r, f"new_{key}")
            if base and new is not None and base == base and new == new:
                grid[i, j] = (new - base) / base * 100
    fig, ax = plt.subplots(figsize=(SIZE[0], 1.2 + 0.45 * len(fields)))
    limit = max(float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0, 1.0)
    image = ax.imshow(grid, cmap="RdYlGn_r", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_yticks(range(len(fields)), [name for _, name in fields])
    step = max(1, len(ranks) // 32)
    ax.set_xticks(range(0, len(ranks), step), [str(r.rank) for r in ranks][::step])
    ax.set_xlabel("rank")
    fig.colorbar(image, ax=ax, label="Δ% new vs base")
    ax.set_title("Per-rank change")
    return _save(fig, path)


def draw_rank_steps(report: Report, path: Path) -> Path:
    """Step time per rank, base vs new (the 64 ranks that moved most)."""
    import numpy as np

    ranks = _ranks_to_draw(report)
    x = np.arange(len(ranks))
    fig, ax = plt.subplots(figsize=SIZE)
    for offset, side, colour in ((-0.2, report.base, "#4C72B0"), (0.2, report.new, "#DD8452")):
        prefix = "base" if side is report.base else "new"
        values = [(getattr(r, f"{prefix}_stage") or 0) / 1000 for r in ranks]
        ax.bar(x + offset, values, width=0.4, color=colour, label=side.label)
    step = max(1, len(ranks) // 32)
    ax.set_xticks(x[::step], [str(r.rank) for r in ranks][::step])
    ax.set_xlabel("rank")
    ax.set_ylabel("ms per step")
    ax.set_title("Step time per rank")
    ax.legend(frameon=False)
    return _save(fig, path)


def draw_memory_chart(comparison: MemoryComparison, out_path: Path) -> Path:
    """Draw reserved memory (MB) over ms since each run's first sample; return ``out_path``.

    Both runs start at 0 so their shapes line up; the dashed lines mark each peak.
    """
    figure = Figure(figsize=MEMORY_SIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    component = comparison.timeline_component or "no data"
    for side, series, colour in (("base", comparison.base_timeline, "tab:blue"),
                                 ("new", comparison.new_timeline, "tab:orange")):
        if not series.time_ms:
            continue
        # Markers on short series: a timeline whose samples share one timestamp (a
        # spreadsheet-mangled file) would otherwise draw nothing.
        marker = "o" if len(series.time_ms) <= MARKER_MAX_POINTS else None
        axes.plot(series.time_ms, series.reserved_mb, drawstyle="steps-post", color=colour,
                  linewidth=1.5, marker=marker, markersize=3,
                  label=f"{side} (rank {series.rank})")
        axes.axhline(max(series.reserved_mb), color=colour, linestyle="--", linewidth=0.8,
                     label=f"{side} peak {max(series.reserved_mb):,.1f} MB")
    if not (comparison.base_timeline.time_ms or comparison.new_timeline.time_ms):
        axes.text(0.5, 0.5, "no memory samples", ha="center", va="center",
                  transform=axes.transAxes)
    else:
        axes.legend(loc="best", fontsize="small")
    axes.set_title(f"Reserved device memory ({component})")
    axes.set_xlabel("time since first sample (ms)")
    axes.set_ylabel("reserved (MB)")
    axes.yaxis.set_major_formatter(StrMethodFormatter("{x:,.1f}"))
    axes.grid(True, linewidth=0.3)
    figure.tight_layout()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # No "Software" metadata: the PNG stays byte-identical across matplotlib versions.
    figure.savefig(out_path, format="png", dpi=DPI, metadata={"Software": None})
    return out_path


def draw_charts(report: Report, out_dir: Path) -> dict[str, Path]:
    """Draw every chart into ``out_dir``; returns {chart name: path}."""
    out_dir = Path(out_dir)
    charts = {
        "step_breakdown": draw_step_breakdown(report, out_dir / "step_breakdown.png"),
        "step_waterfall": draw_waterfall(report, out_dir / "step_waterfall.png"),
    }
    if report.operators:
        charts["top_movers"] = draw_top_movers(report, out_dir / "top_movers.png")
    if len(report.ranks) >= 2:
        charts["rank_heatmap"] = draw_rank_heatmap(report, out_dir / "rank_heatmap.png")
        charts["rank_steps"] = draw_rank_steps(report, out_dir / "rank_steps.png")
    if report.memory is not None:
        charts["memory"] = write_atomic(out_dir / "memory.png",
                                        lambda temp: draw_memory_chart(report.memory, temp))
    return charts
