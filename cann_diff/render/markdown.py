"""report.md from a Report: tables with tabulate, readable when pasted into a ticket."""

from __future__ import annotations

import statistics

from tabulate import tabulate

from .. import format as fmt
from ..report import Report
from .memory import render_memory_markdown

BREAKDOWN_ROWS = (("computing", "Computing"),
                  ("communication_not_overlapped", "Communication (not overlapped = exposed)"),
                  ("overlapped", "Overlapped"),
                  ("communication", "Communication (total)"),
                  ("free", "Free"),
                  ("bubble", "Bubble"),
                  ("preparing", "Preparing"))


class Footnotes:
    """Numbered caveats, printed at the end as benchstat does."""

    def __init__(self):
        self.notes: list[str] = []

    def mark(self, text: str) -> str:
        """Register ``text`` (once) and return its superscript mark."""
        if text not in self.notes:
            self.notes.append(text)
        return fmt.footnote_mark(self.notes.index(text) + 1)

    def render(self) -> list[str]:
        """Markdown lines of the notes section."""
        if not self.notes:
            return []
        lines = ["## Notes", ""]
        lines += [f"{fmt.footnote_mark(i)} {note}  " for i, note in enumerate(self.notes, 1)]
        return [*lines, ""]


def _table(rows: list[list], headers: list[str], align: tuple | None = None) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True,
                    colalign=align)


def _runs(report: Report) -> list[str]:
    def versions(side):
        return side.versions.cann or "–", side.versions.torch_npu or "–"

    b, n = report.base, report.new
    rows = [["label", b.label, n.label],
            ["path", f"`{b.path}`", f"`{n.path}`"],
            ["format", b.format, n.format],
            ["ranks", _ranks(b.ranks), _ranks(n.ranks)],
            ["steps", _ranks(b.steps) or "whole run", _ranks(n.steps) or "whole run"],
            ["CANN", versions(b)[0], versions(n)[0]],
            ["torch_npu", versions(b)[1], versions(n)[1]],
            ["profiler level", b.profiler_level or "–", n.profiler_level or "–"],
            ["step figures from", b.step_source, n.step_source]]
    return [_table(rows, ["", "base", "new"]), ""]


def _ranks(values) -> str:
    if not values:
        return ""
    if len(values) > 8:
        return f"{values[0]}…{values[-1]} ({len(values)})"
    return ", ".join(str(v) for v in values)


def _findings(report: Report) -> list[str]:
    if not report.findings:
        return ["## Findings", "", "Nothing to report beyond the tables below.", ""]
    lines = ["## Findings", ""]
    for finding in report.findings:
        lines.append(f"- **{finding.severity.upper()} · `{finding.id}` · "
                     f"{finding.title}**  ")
        lines.append(f"  {finding.detail}")
    return [*lines, ""]


def _step(report: Report, charts: dict[str, str], notes: Footnotes) -> list[str]:
    s = report.step
    if s.significance == "unknown":
        caveat = next((n.text for n in report.notes if n.code == "one-step"),
                      "one step per side: no significance test is possible; the status "
                      "follows the threshold alone")
        sig = "unknown" + notes.mark(caveat)
    else:
        sig = f"{fmt.p_phrase(s.p_value)} (Welch's t-test on per-step times)"
    ci = fmt.interval(s.ci_low, s.ci_high)
    lines = ["## Step time", "",
             f"Step (Stage) **{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms** "
             f"({fmt.pct(s.delta_pct)}, {fmt.ms(s.delta_us, signed=True)} ms), status "
             f"**{s.status}**; significance: {sig}"
             + (f"; new/base ratio {int(report.thresholds.confidence * 100)}% CI {ci}"
                if ci else "") + ".", ""]
    rows = []
    for key, name in BREAKDOWN_ROWS:
        b = s.breakdown.get(key)
        delta_pct = (b.delta_us / b.base_us * 100
                     if not fmt.is_missing(b.base_us) and b.base_us and
                     not fmt.is_missing(b.delta_us) else None)
        rows.append([name, fmt.ms(b.base_us), fmt.ms(b.new_us),
                     fmt.ms(b.delta_us, signed=True), fmt.pct(delta_pct)])
    rows.append(["**Stage (step)**", f"**{fmt.ms(s.base_us)}**", f"**{fmt.ms(s.new_us)}**",
                 f"**{fmt.ms(s.delta_us, signed=True)}**", f"**{fmt.pct(s.delta_pct)}**"])
    lines += [_table(rows, ["ms per step", "base", "new", "Δ", "Δ%"],
                     ("left", "right", "right", "right", "right")), ""]
    for name, title in (("step_breakdown", "Step breakdown"),
                        ("step_waterfall", "Where the step time went")):
        if name in charts:
            lines += [f"![{title}]({charts[name]})", ""]
    return lines


def _fusion(report: Report) -> list[str]:
    if not report.fusion:
        return []
    rows = []
    for g in report.fusion:
        became = ", ".join(f"{v:g} {k}" for k, v in g.split_counts.items())
        arrow = "fused → split" if g.direction == "split" else "split → fused"
        rows.append([g.fused_type, arrow, fmt.count(g.base_count), fmt.count(g.new_count),
                     became, fmt.ms(g.base_total_us), fmt.ms(g.new_total_us),
                     fmt.ms(g.delta_us, signed=True), fmt.ms(g.exposed_us)])
    headers = ["fused op", "change", "base /step", "new /step", "became / replaced (per step)",
               "base ms", "new ms", "Δ ms", "exposed comm ms"]
    return ["## MC2 fusion (fused compute + communication)", "",
            "Fused operators on one side matched to their split equivalent (MatMul + "
            "collective) on the other. Their rows are not listed again as added/removed.", "",
            _table(rows, headers), ""]


def _communication(report: Report) -> list[str]:
    if not report.communication:
        return []
    rows = []
    for c in report.communication:
        transit = _delta(c, "transit_us")
        wait = _delta(c, "wait_us")
        rows.append([c.comm_type, f"{fmt.count(c.base_count)} → {fmt.count(c.new_count)}",
                     fmt.ms(c.base_total_us), fmt.ms(c.new_total_us),
                     fmt.ms(c.base_exposed_us), fmt.ms(c.new_exposed_us), transit, wait])
    headers = ["type", "count /step", "base ms", "new ms", "base exposed", "new exposed",
               "Δ transit ms", "Δ wait ms"]
    return ["## Communication by type", "", _table(rows, headers), "",
            "Exposed = not hidden behind computation on the same rank. Transit and wait come "
            "from communication.json (– when a run has none).", ""]


def _delta(row, field: str) -> str:
    b, n = getattr(row, f"base_{field}", None), getattr(row, f"new_{field}", None)
    if fmt.is_missing(b) or fmt.is_missing(n):
        return "–"
    return fmt.ms(n - b, signed=True)


def _operator_rows(ops, notes: Footnotes) -> list[list[str]]:
    rows = []
    for op in ops:
        mark = ""
        if op.match_kind in ("family", "type-only"):
            mark = notes.mark("Matched by family (type renamed, e.g. MatMulV2 → MatMulV3)"
                              if op.match_kind == "family" else
                              "Matched by type only: input shapes differ or are unknown "
                              "(Level0 exports have no shapes).")
        small = min(op.base_instances, op.new_instances)
        if 0 < small < 4:
            mark += notes.mark("Fewer than 4 instances on a side: Mann-Whitney cannot reach "
                               "p < 0.05; the change is shown as ~ unless counts changed.")
        rows.append([f"{op.op_type}{mark}", f"`{fmt.shapes(op.input_shapes)}`",
                     f"{fmt.count(op.base_count)} → {fmt.count(op.new_count)}",
                     fmt.us(op.base_total_us), fmt.us(op.new_total_us),
                     fmt.us(op.delta_us, signed=True),
                     fmt.status_mark(op.status, op.delta_pct), fmt.p_value(op.p_value),
                     fmt.interval(op.ci_low, op.ci_high)])
    return rows


OP_HEADERS = ["operator", "input shapes", "count /step", "base /step", "new /step", "Δ", "change",
              "p", "ratio CI"]


def _operators(report: Report, charts: dict[str, str], notes: Footnotes) -> list[str]:
    plain = [op for op in report.operators if not op.fusion]
    lines = []
    for status, title in (("regressed", "Top regressions"), ("improved", "Top improvements")):
        rows = [op for op in plain if op.status == status][: report.top_n]
        lines += [f"## {title}", ""]
        lines += [_table(_operator_rows(rows, notes), OP_HEADERS), ""] if rows else \
            [f"No operator {status} significantly by ≥ "
             f"{report.thresholds.threshold_pct:g}%.", ""]
    quiet = [op for op in plain if op.status == "unchanged"][: report.top_n]
    if quiet:
        lines += [f"## Below the bar (not significant, or smaller than "
                  f"{report.thresholds.threshold_pct:g}%)", "",
                  "`~`: not significant at "
                  f"α = {report.thresholds.alpha:g}, or smaller than "
                  f"{report.thresholds.threshold_pct:g}%.", "",
                  _table(_operator_rows(quiet, notes), OP_HEADERS), ""]
    if "top_movers" in charts:
        lines += [f"![Top movers]({charts['top_movers']})", ""]
    for status, title in (("added", "Only in new (added)"), ("removed", "Only in base (removed)")):
        rows = [op for op in plain if op.status == status][: report.top_n]
        if rows:
            lines += [f"## {title}", "", _table(_operator_rows(rows, notes), OP_HEADERS), ""]
    unchanged = sum(op.status == "unchanged" for op in report.operators)
    lines += [f"{unchanged} operator key(s) unchanged in all; every key is in report.json.", ""]
    return lines


def _ranks_section(report: Report, charts: dict[str, str]) -> list[str]:
    ranks = report.ranks
    if len(ranks) < 2:
        return []
    ordered = sorted(ranks, key=lambda r: -abs(r.delta_stage_us or 0))
    shown = ordered[: report.top_n]
    rows = [[r.rank, fmt.ms(r.base_stage), fmt.ms(r.new_stage),
             fmt.ms(r.delta_stage_us, signed=True),
             fmt.ms(r.base_communication_not_overlapped),
             fmt.ms(r.new_communication_not_overlapped),
             fmt.ms(r.base_wait_us), fmt.ms(r.new_wait_us)] for r in shown]
    deltas = [r.delta_stage_us for r in ranks if not fmt.is_missing(r.delta_stage_us)]
    summary = ""
    if deltas:
        summary = (f"Across {len(ranks)} ranks: median Δ step "
                   f"{fmt.ms(statistics.median(deltas), True)} ms, largest "
                   f"{fmt.ms(max(deltas, key=abs), True)} ms.")
    more = f" Showing the {len(shown)} ranks that moved most; all are in report.json and " \
        "ranks.csv." if len(shown) < len(ranks) else ""
    lines = ["## Per rank", "", summary + more, "",
             _table(rows, ["rank", "base step ms", "new step ms", "Δ ms", "base exposed",
                           "new exposed", "base wait", "new wait"]), ""]
    for name, title in (("rank_heatmap", "Per-rank change"), ("rank_steps", "Step per rank")):
        if name in charts:
            lines += [f"![{title}]({charts[name]})", ""]
    return lines


def _groups_section(report: Report) -> list[str]:
    groups = report.comm_groups
    if not groups:
        return []

    def moved(g):
        return abs((g.new_elapse_us or 0) - (g.base_elapse_us or 0))

    rows = []
    for g in sorted(groups, key=moved, reverse=True)[: report.top_n]:
        links = ", ".join(f"{link.upper()} {_gbps(g, link)}" for link in ("hccs", "rdma", "sio")
                          if not (fmt.is_missing(getattr(g, f"base_{link}_gbps"))
                                  and fmt.is_missing(getattr(g, f"new_{link}_gbps"))))
        rows.append([f"`{fmt.shapes(str(g.group), 24)}`",
                     f"{fmt.count(g.base_ops)} → {fmt.count(g.new_ops)}",
                     fmt.ms(g.base_elapse_us), fmt.ms(g.new_elapse_us),
                     fmt.ms(g.base_transit_us), fmt.ms(g.new_transit_us),
                     f"{_ratio(g.base_wait_ratio)} → {_ratio(g.new_wait_ratio)}",
                     links or "–"])
    return ["## Communication groups", "",
            "Per group, per step and rank (communication.json): a wait ratio that grows with "
            "flat transit means ranks wait for a straggler; growing transit means more or "
            "slower transfer.", "",
            _table(rows, ["group", "ops /step", "base ms", "new ms", "base transit",
                          "new transit", "wait ratio", "bandwidth GB/s base → new"]), ""]


def _ratio(value) -> str:
    return "–" if fmt.is_missing(value) else f"{value:.2f}"


def _gbps(group, link: str) -> str:
    b, n = getattr(group, f"base_{link}_gbps"), getattr(group, f"new_{link}_gbps")
    def show(value) -> str:
        return "–" if fmt.is_missing(value) else f"{value:,.1f}"

    return f"{show(b)} → {show(n)}"


def _categories(report: Report) -> list[str]:
    rows = [[c.category, f"{fmt.count(c.base_count)} → {fmt.count(c.new_count)}",
             fmt.ms(c.base_total_us), fmt.ms(c.new_total_us),
             fmt.ms(c.delta_us, signed=True)] for c in report.categories]
    return ["## Kernel time by category", "",
            _table(rows, ["category", "kernels /step", "base ms", "new ms", "Δ ms"]),
            "", "Kernel time is the sum of kernel durations; it can exceed the step when "
            "streams overlap.", ""]


def render_markdown(report: Report, charts: dict[str, str] | None = None) -> str:
    """The whole report.md; ``charts`` maps chart names to relative file names."""
    charts = charts or {}
    notes = Footnotes()
    for warning in report.warnings:
        notes.mark(warning)
    lines = [f"# cann-diff: {report.base.label} vs {report.new.label}", "",
             f"**Verdict:** {report.headline}", ""]
    missing = [*report.base.warnings, *report.new.warnings]
    if missing:
        lines += [f"> ⚠ {side}: {w}" for side, ws in (("base", report.base.warnings),
                                                       ("new", report.new.warnings))
                  for w in ws] + [""]
    lines += _runs(report) + _findings(report) + _step(report, charts, notes)
    lines += _fusion(report) + _communication(report) + _operators(report, charts, notes)
    lines += _groups_section(report) + _ranks_section(report, charts) + _categories(report)
    if report.memory is not None:
        lines += [render_memory_markdown(report.memory, charts.get("memory")), ""]
    lines += notes.render()
    lines.append(f"<sub>Generated by cann-diff. Thresholds: α = {report.thresholds.alpha:g}, "
                 f"minimum change {report.thresholds.threshold_pct:g}%. Times are per step "
                 f"and per rank.</sub>")
    return "\n".join(lines) + "\n"
