"""The ladder summary as report.md, report.html and report.json (``--ladder``).

Blocks (``document.py``) laid out by the same writers as every report: the path's
verdict, the step along the path with each rung's change and its report, what moved on
which rung (by layer), and the gate, first profile against the last.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import format as fmt
from ..report.ladder import LadderChange, LadderSummary, Rung
from .document import (
    Block,
    Bullets,
    Chart,
    Heading,
    Paragraph,
    Table,
    cell,
    inline,
    report_link,
    strong,
)
from .files import write_summary

CHART = "ladder_step"
# Rows of the "What moved where" table per kind; report.json holds every change.
SHOWN = {"part": None, "fusion": None, "collective": 10, "operator": 15}


def _step_cells(rung: Rung) -> tuple:
    s = rung.step
    mark = f"{fmt.pct(s.change_pct)} ~" if s.significance == "tested" and not s.significant \
        else f"{fmt.pct(s.change_pct)} ({s.status})"
    return (cell(fmt.ms(s.new_us), sort=s.new_us), cell(mark, sort=s.change_pct),
            cell(fmt.p_value(s.p_value), sort=s.p_value))


def _path(summary: LadderSummary) -> list[Block]:
    first = summary.rungs[0].step
    rows = [(cell(f"{summary.labels[0]} (base)"), cell(fmt.ms(first.base_us),
                                                        sort=first.base_us),
             cell(""), cell(""), cell(""))]
    for rung in summary.rungs:
        rows.append((cell(f"rung {rung.index}: ", report_link(rung.new, rung.report)),
                     *_step_cells(rung), cell(rung.name.partition(": ")[2] or "–")))
    gate = summary.gate
    rows.append((cell(strong("first → last"), ": ", report_link(gate.new, gate.report)),
                 *_step_cells(gate), cell(_gate_text(summary))))
    return [Heading(2, inline("Step along the path"), "path"),
            Table(("profile", "step ms", "Δ step", "p", "what changed / the gate"),
                  tuple(rows), ("left", "right", "right", "right", "left")),
            Chart(CHART, "Step time along the upgrade path"),
            Bullets(tuple(inline(r.sentence, ".") for r in summary.rungs))]


def _gate_text(summary: LadderSummary) -> str:
    if summary.gate_pct is None:
        return "no gate (--fail-on-regression)"
    verdict = "fails" if summary.gate_failed else "passes"
    return f"gate ≥ {summary.gate_pct:g}% {verdict}"


def _later(change: LadderChange) -> str:
    later = [m for m in change.moves[1:]]
    if not later:
        return "–"
    return "; ".join(f"rung {m.rung} {fmt.ms(m.delta_us, signed=True)} ms"
                     + (" (undoes it)" if m.rung == change.undone_at else "") for m in later)


def _changes(summary: LadderSummary) -> list[Block]:
    if not summary.changes:
        return [Heading(2, inline("What moved where"), "moved"),
                Paragraph(inline("No rung moved a step part, an operator, a collective or "
                                 "an MC2 fusion significantly."))]
    rows = []
    counts: dict[str, int] = {}
    left_out = 0
    for change in summary.changes:
        limit = SHOWN[change.kind]
        counts[change.kind] = counts.get(change.kind, 0) + 1
        if limit is not None and counts[change.kind] > limit:
            left_out += 1
            continue
        rows.append((cell(change.item), cell(change.kind), cell(change.layer),
                     cell(f"rung {change.rung}", sort=change.rung),
                     cell(fmt.ms(change.delta_us, signed=True), sort=change.delta_us),
                     cell(_later(change)), cell(change.detail or "–")))
    blocks: list[Block] = [
        Heading(2, inline("What moved where"), "moved"),
        Paragraph(inline("Each item is attributed to the rung where it first moved, with its "
                         "Δ there (ms per step); a later rung moving it the other way undoes "
                         "it. Layers: kernel (same implementation and placement, time "
                         "changed), placement (core, block dim), implementation (kernel, "
                         "formats, dtypes, op state), dispatch (Free: the device waits for "
                         "the host), graph (operators added, removed, run more or fewer "
                         "times, MC2 fused or split), communication (collectives, exposed "
                         "communication).")),
        Table(("item", "kind", "layer", "first moved", "Δ ms", "later rungs", "why"),
              tuple(rows), ("left", "left", "left", "left", "right", "left", "left"),
              sortable=True, prose=("why",))]
    if left_out:
        blocks.append(Paragraph(inline(f"{left_out} smaller operator or collective moves "
                                       "are left out here; report.json lists every one."),
                                "small"))
    return blocks


def ladder_blocks(summary: LadderSummary) -> list[Block]:
    """The whole ladder summary as blocks."""
    t = summary.thresholds
    return [Heading(1, inline("cann-diff ladder: " + " → ".join(summary.labels))),
            Paragraph(inline(strong("Verdict:"), " ", summary.verdict), "verdict"),
            *_path(summary), *_changes(summary),
            Paragraph(inline(f"Generated by cann-diff. Thresholds: α = {t.alpha:g}, minimum "
                             f"change {t.threshold_pct:g}%. Times are per step and per rank. "
                             "Each rung's full report, and the first profile's against the "
                             "last, is in its own directory."), "footer")]


def ladder_images(summary: LadderSummary) -> dict[str, bytes]:
    """The ladder's chart as PNG bytes: {``CHART``: bytes}."""
    from .charts import ladder_figure, png_bytes

    return {CHART: png_bytes(ladder_figure(summary))}


def write_ladder_summary(summary: LadderSummary, out_dir: Path, charts: bool = True,
                         html: bool = True,
                         images: Mapping[str, bytes] | None = None) -> list[Path]:
    """Write the ladder's report.md, report.html, report.json and chart into ``out_dir``."""
    images = {} if not charts else images if images is not None else ladder_images(summary)
    return write_summary(Path(out_dir), ladder_blocks(summary), images, summary.to_dict(), html)
