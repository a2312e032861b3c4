"""The several-candidates summary as report.md, report.html and report.json.

The words are blocks (``document.py``), laid out by the same Markdown and HTML writers as
a pairwise report, so both files say the same and every name is escaped the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .. import format as fmt
from ..report.model import Candidate, CandidatesSummary
from .document import (
    Block,
    Bullets,
    Chart,
    Heading,
    Inline,
    Paragraph,
    Span,
    Table,
    cell,
    code,
    inline,
    report_link,
    strong,
)
from .files import write_summary

CHART = "candidates_step"


def _step_mark(step) -> str:
    """Δ% of a step with its verdict; ``~`` when the test found no significant change."""
    if step.significance == "tested" and not step.significant:
        return f"{fmt.pct(step.change_pct)} ~"
    return f"{fmt.pct(step.change_pct)} ({step.status})"


def _figure_cells(summary: CandidatesSummary, attr: str) -> list:
    first = getattr(summary.candidates[0], attr)
    return [cell(fmt.ms(first.base_us), sort=first.base_us),
            *[cell(f"{fmt.ms(getattr(c, attr).new_us)} "
                   f"({fmt.ms(getattr(c, attr).delta_us, signed=True)})",
                   sort=getattr(c, attr).new_us) for c in summary.candidates]]


def _memory_cell(candidate: Candidate):
    if candidate.peak_reserved_mb is None:
        return cell("not recorded")
    return cell(f"{candidate.peak_reserved_mb:,.1f} MB "
                f"({fmt.pct(candidate.peak_reserved_delta_pct)})")


def _overview(summary: CandidatesSummary) -> list[Block]:
    cands = summary.candidates
    first = cands[0]
    rows = [(cell("step ms"), cell(fmt.ms(first.step.base_us)),
             *[cell(fmt.ms(c.step.new_us)) for c in cands]),
            (cell("Δ step"), cell(""), *[cell(_step_mark(c.step)) for c in cands]),
            (cell("p (step)"), cell(""), *[cell(fmt.p_value(c.step.p_value)) for c in cands])]
    for name, attr in (("Computing ms", "computing"),
                       ("exposed communication ms", "exposed_communication"),
                       ("Free ms", "free")):
        rows.append((cell(name), *_figure_cells(summary, attr)))
    rows.append((cell("MC2 fusion"), cell(""), *[cell(c.fusion) for c in cands]))
    rows.append((cell("peak reserved memory"), cell(""), *[_memory_cell(c) for c in cands]))
    if summary.gate_pct is not None:
        rows.append((cell(f"gate ≥ {summary.gate_pct:g}%"), cell(""),
                     *[cell("fails" if c.gate_failed else "passes") for c in cands]))
    headers = ("", f"{summary.base.label} (base)", *[c.label for c in cands])
    return [Heading(2, inline("Candidates"), "candidates"),
            Table(headers, tuple(rows), ("left",) + ("right",) * (len(headers) - 1)),
            Chart(CHART, "Step time per candidate")]


def _findings(summary: CandidatesSummary) -> list[Block]:
    items = []
    for c in summary.candidates:
        shown = c.findings[:3]
        text: list[str | Span | Inline] = [strong(c.label), " (",
                                           report_link("full report", c.report), "): "]
        if not shown:
            text.append("nothing beyond the tables")
        for i, f in enumerate(shown):
            text += (["; "] if i else []) + [code(f.id), f" {f.title}"]
        items.append(inline(*text))
    return [Heading(2, inline("Top findings"), "findings"), Bullets(tuple(items))]


MARKS = {"unchanged": " ~", "not-significant": " ~", "untested": " (untested)",
         "added": " (added)", "removed": " (removed)", "mc2": " (MC2)",
         "count-changed": " (count)", "reshaped": " (reshaped)"}


def _mark(status: str | None, below: bool, tested: bool) -> str:
    """The status mark beside a Δ: † for a significant change under the threshold."""
    if below:
        return f" {fmt.BELOW_MARK}"
    if status == "unchanged" and not tested:
        return MARKS["untested"]
    return MARKS.get(status or "", "")


def _movers(summary: CandidatesSummary) -> list[Block]:
    if not summary.movers:
        return []
    headers = ("operator", "input shapes", "base /step",
               *[f"Δ {c.label}" for c in summary.candidates])
    rows = []
    for m in summary.movers:
        below = m.below_threshold or (False,) * len(m.status)
        tested = m.tested or (True,) * len(m.status)
        cells = [cell("–") if d is None else
                 cell(f"{fmt.us(d, signed=True)}{_mark(s, b, t)}", sort=d)
                 for d, s, b, t in zip(m.delta_us, m.status, below, tested)]
        rows.append((cell(m.op_type), cell(code(fmt.shapes(m.input_shapes or "*"))),
                     cell(fmt.us(m.base_total_us), sort=m.base_total_us), *cells))
    return [Heading(2, inline("Largest operator movers"), "movers"),
            Paragraph(inline("Δ time per step and rank, new − base, in each candidate. No "
                             "mark: regressed or improved (significant, ≥ the threshold); ",
                             fmt.BELOW_MARK, ": significant, under the threshold; ~: not "
                             "significant; (untested): "
                             "too few instances for a test; (count): instances per step "
                             "changed, not their speed; (MC2): part of an MC2 fusion change "
                             "(see that candidate's report); –: the key is not in that pair; "
                             "*: no input shapes recorded.")),
            Table(headers, tuple(rows), ("left", "left") + ("right",) * (len(headers) - 2),
                  sortable=True)]


def summary_blocks(summary: CandidatesSummary) -> list[Block]:
    """The whole summary as blocks."""
    t = summary.thresholds
    return [Heading(1, inline(f"cann-diff: {summary.base.label} vs "
                              + ", ".join(c.label for c in summary.candidates))),
            Paragraph(inline(strong("Verdict:"), " ", summary.verdict), "verdict"),
            *_overview(summary), *_findings(summary), *_movers(summary),
            Paragraph(inline(f"Generated by cann-diff. Thresholds: α = {t.alpha:g}, minimum "
                             f"change {t.threshold_pct:g}%. Times are per step and per rank. "
                             "Each candidate's full report is in its own directory."),
                      "footer")]


def candidates_images(summary: CandidatesSummary) -> dict[str, bytes]:
    """The summary's chart as PNG bytes: {``CHART``: bytes}."""
    from .charts import candidates_figure, png_bytes

    return {CHART: png_bytes(candidates_figure(summary))}


def write_candidates_summary(summary: CandidatesSummary, out_dir: Path, charts: bool = True,
                             html: bool = True,
                             images: Mapping[str, bytes] | None = None) -> list[Path]:
    """Write the summary's report.md, report.html, report.json and chart into ``out_dir``.

    ``images``: the chart already drawn (``charts.candidates_images``); None: drawn here.
    """
    if not charts:
        images = {}
    elif images is None:
        images = candidates_images(summary)
    return write_summary(Path(out_dir), summary_blocks(summary), images, summary.to_dict(),
                         html)
