"""What the report says, once, as document blocks: report.md and report.html lay it out.

Every section reads the Report only. A section without data is replaced by one line
saying what is absent and why (role ``absent``); a chart is referenced only when drawn.
To add a column, add it to the table here: both formats show it.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection

from .. import format as fmt
from ..report import CategoryRow, FamilyRow, OperatorRow, Report
from .document import (
    Block,
    Bullets,
    Cell,
    Chart,
    Finding,
    Findings,
    Footnotes,
    Heading,
    Inline,
    Paragraph,
    Table,
    Warnings,
    absent,
    cell,
    code,
    inline,
    section,
    strong,
)
from .memory_section import memory_blocks
from .non_compute_section import collective_blocks, free_blocks
from .provenance import provenance_blocks, ranks_text
from .why_section import why_blocks

BREAKDOWN_ROWS = (("computing", "Computing"),
                  ("communication_not_overlapped", "Communication (not overlapped = exposed)"),
                  ("overlapped", "Overlapped"),
                  ("communication", "Communication (total)"),
                  ("free", "Free"),
                  ("bubble", "Bubble"),
                  ("preparing", "Preparing"))
OP_HEADERS = ("operator", "input shapes", "count /step", "base /step", "new /step", "Δ",
              "Δ count · per instance", "change per instance", "p", "ratio CI")
# The last column of an operator table whose keys say why they changed (compare/attributes.py).
WHY_HEADER = "why"
RUNG_NOTES = {
    "family": "Matched by family (type renamed, e.g. MatMulV2 → MatMulV3), same input shapes.",
    "renamed": "Matched across a CANN rename (cann_diff/data/renames.json, e.g. ReduceSumD → "
               "ReduceSum): same shapes once the attribute inputs the newer kernel takes are "
               "set aside.",
    "normalized": "Matched on normalized shapes: the same tensors in another data format "
                  "(C0 16 ↔ 8).",
    "type-only": "Matched by type only: input shapes differ or are unknown (Level0 exports "
                 "have no shapes); reshaped, compared by totals.",
}
NO_SHAPES = inline(code("*"), ": no input shapes recorded (communication ops, Level0 exports "
                                "and trace-only profiles carry none); the key is the type alone.")
TASKS_SOURCE = ("Transfer, wait and idle come from the HCCL tasks of every plane (Where the "
                "collectives' time went, below, shows communication.json's one-plane figures "
                "beside them).")
JSON_SOURCE = ("Transit, wait (synchronization included) and idle come from "
               "communication.json, where elapse = transit + wait + idle (– when a run has "
               "none); it splits one HCCL plane.")
MIXED_SOURCE = (" Types whose runs both have HCCL tasks take them from the tasks instead (every "
                "plane).")
LINKS = ("hccs", "pcie", "sio", "rdma")  # SDMA is the sum of the on-node links: not repeated


# --------------------------------------------------------------------------- findings, step


def _findings(report: Report) -> list[Block]:
    head = section("Findings", "findings")
    if not report.findings:
        return [head, Paragraph(inline("Nothing to report beyond the tables below."))]
    return [head, Findings(tuple(
        Finding(f.severity, strong(f"{f.severity.upper()} · ", code(f.id), f" · {f.title}"),
                inline(f.detail)) for f in report.findings))]


def _step(report: Report, charts: Collection[str], notes: Footnotes) -> list[Block]:
    s = report.step
    if s.significance == "unknown":
        caveat = next((n.text for n in report.notes if n.code == "one-step"),
                      "one step per side: no significance test is possible; the status "
                      "follows the threshold alone")
        sig = "unknown" + notes.mark(caveat)
    else:
        sig = f"{fmt.p_phrase(s.p_value)} ({s.test_name}: {fmt.pct(s.change_pct)})"
    ci = fmt.interval(s.ci_low, s.ci_high)
    ratio = (f"; new/base ratio {int(report.thresholds.confidence * 100)}% CI {ci}"
             if ci else "")
    kept = [x for x in s.outliers]
    if kept:
        ratio += (". Outlier steps kept in the comparison (the test weighs them as any step): "
                  + ", ".join(f"{x.side} step {x.step} ({fmt.ms(x.stage_us)} ms, "
                              f"{x.stage_us / x.median_us:.1f}× the median)"
                              for x in kept if x.median_us))
    status = s.status + (f" (significant, under the {s.threshold_pct:g}% step threshold)"
                         if s.below_threshold else "")
    gate = "" if s.gate is None else (f" Gate --fail-on-regression {s.gate_pct:g}%: "
                                      f"{'failed' if s.gate else 'passed'}.")
    summary = inline("Step (Stage) ", strong(f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms"),
                     f" ({fmt.pct(s.delta_pct)}, {fmt.ms(s.delta_us, signed=True)} ms), status ",
                     strong(status), f"; significance: {sig}{ratio}.{gate}")
    rows = []
    for key, name in BREAKDOWN_ROWS:
        b = s.breakdown.get(key)
        delta_pct = (b.delta_us / b.base_us * 100
                     if not fmt.is_missing(b.base_us) and b.base_us and
                     not fmt.is_missing(b.delta_us) else None)
        rows.append((cell(name), cell(fmt.ms(b.base_us)), cell(fmt.ms(b.new_us)),
                     cell(fmt.ms(b.delta_us, signed=True)), cell(fmt.pct(delta_pct))))
    rows.append((cell(strong("Stage (step)")), cell(strong(fmt.ms(s.base_us))),
                 cell(strong(fmt.ms(s.new_us))), cell(strong(fmt.ms(s.delta_us, signed=True))),
                 cell(strong(fmt.pct(s.delta_pct)))))
    blocks: list[Block] = [section("Step time", "step"), Paragraph(summary)]
    if s.screened and s.all_steps is not None:
        every = s.all_steps
        left_out = ", ".join(
            f"{x.side} step {x.step} ({fmt.ms(x.stage_us)} ms, "
            + (f"{x.stage_us / x.median_us:.1f}× the median)" if x.reason == "warm-up"
               and x.median_us else "left out with the other side's warm-up)")
            for x in s.screened)
        estimate = every.shift_pct if every.shift_pct is not None else every.delta_pct
        blocks.append(Paragraph(inline(
            f"Warm-up steps left out of both sides, at the same positions: {left_out}. Over "
            f"every step the step test's estimate is {fmt.pct(estimate)} (the mean step "
            f"{fmt.ms(every.base_us)} → {fmt.ms(every.new_us)} ms, "
            f"{fmt.pct(every.delta_pct)}); --steps chooses the steps instead.")))
    blocks.append(Table(("ms per step", "base", "new", "Δ", "Δ%"), tuple(rows),
                        ("left", "right", "right", "right", "right")))
    blocks += _compute_split(report)
    blocks += [Chart(name, title) for name, title in
               (("step_breakdown", "Step breakdown"),
                ("step_waterfall", "Where the step time went")) if name in charts]
    return blocks


def _compute_split(report: Report) -> list[Block]:
    """Where Δ Computing went: rows that sum to it (findings/compute_split.py)."""
    split = report.compute
    if split is None or fmt.is_missing(split.delta_computing_us):
        return []
    rows = [(cell(r.label), cell(fmt.ms(r.delta_us, signed=True), sort=r.delta_us))
            for r in split.rows]
    rows.append((cell(strong("Δ Computing (step_trace_time)")),
                 cell(strong(fmt.ms(split.delta_computing_us, signed=True)))))
    return [Paragraph(inline(strong("Where Δ Computing went"), " (ms per step; the rows sum "
                             "to Δ Computing): ", split.sentence)),
            Table(("part", "Δ ms"), tuple(rows), ("left", "right"))]


# --------------------------------------------------------------------------- fusion, comm


def _fusion(report: Report) -> list[Block]:
    if not report.fusion:
        return []
    rows = []
    for g in report.fusion:
        became = ", ".join(f"{v:g} {k}" for k, v in g.split_counts.items())
        arrow = "fused → split" if g.direction == "split" else "split → fused"
        rows.append((cell(g.fused_type), cell(arrow),
                     cell(fmt.count(g.base_count), sort=g.base_count),
                     cell(fmt.count(g.new_count), sort=g.new_count), cell(became),
                     cell(fmt.ms(g.base_total_us), sort=g.base_total_us),
                     cell(fmt.ms(g.new_total_us), sort=g.new_total_us),
                     cell(fmt.ms(g.delta_us, signed=True), sort=g.delta_us),
                     cell(fmt.ms(g.exposed_us), sort=g.exposed_us)))
    headers = ("fused op", "change", "base /step", "new /step", "became / replaced (per step)",
               "base ms", "new ms", "Δ ms", "exposed comm ms")
    return [section("MC2 fusion (fused compute + communication)", "fusion"),
            Paragraph(inline("Fused operators on one side matched to their split equivalent "
                             "(MatMul + collective) on the other. Their rows are not listed "
                             "again as added/removed.")),
            Table(headers, tuple(rows))]


def _delta(row, field: str) -> tuple[str, float | None]:
    b, n = getattr(row, f"base_{field}", None), getattr(row, f"new_{field}", None)
    if fmt.is_missing(b) or fmt.is_missing(n):
        return "–", None
    return fmt.ms(n - b, signed=True), n - b


def _communication(report: Report) -> list[Block]:
    if not report.communication:
        return []
    rows = []
    for c in report.communication:
        transit, wait, idle = (_delta(c, "transit_us"), _delta(c, "wait_us"),
                               _delta(c, "idle_us"))
        rows.append((cell(c.comm_type),
                     cell(f"{fmt.count(c.base_count)} → {fmt.count(c.new_count)}",
                          sort=c.delta_count),
                     cell(fmt.ms(c.base_total_us), sort=c.base_total_us),
                     cell(fmt.ms(c.new_total_us), sort=c.new_total_us),
                     cell(fmt.ms(c.base_exposed_us), sort=c.base_exposed_us),
                     cell(fmt.ms(c.new_exposed_us), sort=c.new_exposed_us),
                     cell(transit[0], sort=transit[1]), cell(wait[0], sort=wait[1]),
                     cell(idle[0], sort=idle[1])))
    tasks = any(c.parts_source == "hccl_tasks" for c in report.communication)
    headers = ("type", "count /step", "base ms", "new ms", "base exposed", "new exposed",
               "Δ transfer ms" if tasks else "Δ transit ms", "Δ wait ms", "Δ idle ms")
    source = (TASKS_SOURCE if all(c.parts_source == "hccl_tasks" for c in report.communication)
              else JSON_SOURCE + (MIXED_SOURCE if tasks else ""))
    return [section("Communication by type", "communication"), Table(headers, tuple(rows)),
            Paragraph(inline("Exposed = not hidden behind computation on the same rank. "
                             + source))]


# --------------------------------------------------------------------------- operators


def _operator_rows(ops: list[OperatorRow], notes: Footnotes,
                   why: bool = False) -> tuple[tuple[Cell, ...], ...]:
    """One row per key; ``why``: with its why cell last ("–" when it says nothing)."""
    rows = []
    for op in ops:
        marks = [notes.mark(RUNG_NOTES[op.match_kind])] if op.match_kind in RUNG_NOTES else []
        if op.base_instances and op.new_instances and op.per_instance and not op.tested:
            marks.append(notes.mark("Untested: with these instance counts no test can reach "
                                    "p < α (Mann-Whitney's smallest p is 2 / C(n + m, n)); "
                                    "the change is shown, never called slower or faster."))
        claimed = op.new_claimed or op.base_claimed
        if claimed:
            marks.append(notes.mark(inline(
                "Part of this key's instances belong to an MC2 fusion change (see the MC2 "
                "fusion section): ", f"{fmt.count(op.base_claimed or 0)} per step in base, "
                f"{fmt.count(op.new_claimed or 0)} in new.")))
        if op.below_threshold:
            marks.append(notes.mark(f"{fmt.BELOW_MARK} significant, but under the threshold: "
                                    "shown with its % and not called regressed/improved."))
        # Several marks apart, so that ⁶ and ⁴ do not read as note 64.
        mark = MARK_GAP.join(marks)
        rows.append((cell(op.op_type, mark), Cell(_shapes_cell(op, notes)),
                     cell(f"{fmt.count(op.base_count)} → {fmt.count(op.new_count)}",
                          sort=op.new_count - op.base_count),
                     cell(fmt.us(op.base_total_us), sort=op.base_total_us),
                     cell(fmt.us(op.new_total_us), sort=op.new_total_us),
                     cell(fmt.us(op.delta_us, signed=True), sort=op.delta_us),
                     cell(_effects(op), sort=op.count_effect_us),
                     cell(fmt.status_mark(op.status, op.instance_change_pct,
                                          op.below_threshold, op.tested),
                          sort=op.instance_change_pct),
                     cell(fmt.p_value(op.p_value), sort=op.p_value),
                     cell(op.ci_note or fmt.interval(op.ci_low, op.ci_high), sort=op.ci_low),
                     *((cell(op.why or "–"),) if why else ())))
    return tuple(rows)


MARK_GAP = "\u2009"  # a thin space between footnote marks
# Characters of input shapes a table shows (one line; report.html shows the rest on hover).
SHAPES_SHOWN = 24


def _shapes_cell(op: OperatorRow, notes: Footnotes) -> Inline:
    """The key's shapes; a key paired across shapes shows both; ``*`` only when none."""
    if op.input_shapes:
        return inline(code(fmt.shapes(op.input_shapes, SHAPES_SHOWN), op.input_shapes))
    if op.base_input_shapes or op.new_input_shapes:
        base, new = op.base_input_shapes or "–", op.new_input_shapes or "–"
        return inline(code(fmt.shapes(base, SHAPES_SHOWN // 2), base), " → ",
                      code(fmt.shapes(new, SHAPES_SHOWN // 2), new))
    return inline(code(fmt.shapes(op.input_shapes)), notes.mark(NO_SHAPES))


def _effects(op: OperatorRow) -> str:
    """Δ split into its count effect and its per-instance effect (µs per step)."""
    if fmt.is_missing(op.count_effect_us) or fmt.is_missing(op.instance_effect_us):
        return "–"
    return (f"{fmt.us(op.count_effect_us, signed=True)} · "
            f"{fmt.us(op.instance_effect_us, signed=True)}")


def _op_table(ops: list[OperatorRow], notes: Footnotes) -> Table:
    """The operator table; with a why column when a key of it says why.

    Never for keys on one side only: added and removed keys have nothing to compare.
    """
    why = any(op.why for op in ops)
    headers = (*OP_HEADERS, WHY_HEADER) if why else OP_HEADERS
    return Table(headers, _operator_rows(ops, notes, why), sortable=True,
                 prose=(WHY_HEADER,) if why else ())


def _operators(report: Report, charts: Collection[str], notes: Footnotes) -> list[Block]:
    if not report.operators:
        return [absent("Operators", "neither run has kernel rows (a cluster summary holds "
                                    "step and communication figures only): no operator, "
                                    "category or family comparison.")]
    plain = [op for op in report.operators if not op.fusion]
    pct = f"{report.thresholds.threshold_pct:g}%"
    top = report.top_n

    def of(status: str | tuple[str, ...]) -> list[OperatorRow]:
        wanted = (status,) if isinstance(status, str) else status
        return [op for op in plain if op.status in wanted]

    def table(rows: list[OperatorRow]) -> list[Block]:
        """The table of ``rows`` cut at --top, saying so when it is cut."""
        shown: list[Block] = [_op_table(rows[:top], notes)]
        if len(rows) > top:
            shown.append(Paragraph(inline(f"Showing {top} of {len(rows)}, largest |Δ| "
                                          "first; every key is in report.json.")))
        return shown

    blocks: list[Block] = []
    for status, title, anchor in (("regressed", "Top regressions", "regressions"),
                                  ("improved", "Top improvements", "improvements")):
        rows = of(status)
        blocks.append(section(title, anchor))
        blocks += table(rows) if rows else [Paragraph(
            inline(f"No operator {status} per instance, significantly and by ≥ {pct}."))]
    unproven = of(("not-significant", "untested"))
    if unproven:
        blocks += [section(f"Moved by ≥ {pct}, not established", "not-established"),
                   Paragraph(inline(f"These keys moved per instance by at least {pct}, but "
                                    "no test establishes it: ", code("~"), " tested, not "
                                    f"significant at α = {report.thresholds.alpha:g}; ",
                                    code("untested"), ": too few instances for any test "
                                    "to reach α. Neither is called slower or faster.")),
                   *table(unproven)]
    counted = of("count-changed")
    if counted:
        blocks += [section("Count changed (instances per step, not speed)", "count-changed"),
                   Paragraph(inline("These keys run more or fewer instances per step; their "
                                    "Δ splits into the count effect (Δ instances × base mean) "
                                    "and the per-instance effect. A type without input shapes "
                                    "whose count moved is compared by its totals (all of its "
                                    "Δ is count effect). A count change is never called "
                                    "slower or faster.")),
                   *table(counted)]
    reshaped = of("reshaped")
    if reshaped:
        blocks += [section("Reshaped (paired by family only, different shapes)", "reshaped"),
                   Paragraph(inline("Keys paired by family without equal input shapes: their "
                                    "totals are compared, never called slower or faster.")),
                   *table(reshaped)]
    quiet = of("unchanged")
    if quiet:
        blocks += [section(f"Below the bar (smaller than {pct} per instance)", "below"),
                   Paragraph(inline(code("~"), f": not significant at α = "
                                    f"{report.thresholds.alpha:g}; ", code(fmt.BELOW_MARK),
                                    f": significant, but smaller than {pct} per instance.")),
                   _op_table(quiet[:top], notes)]
    if "top_movers" in charts:
        blocks.append(Chart("top_movers", "Top movers"))
    for status, title, anchor in (("added", "Only in new (added)", "added"),
                                  ("removed", "Only in base (removed)", "removed")):
        rows = of(status)
        if rows:
            blocks += [section(title, anchor), *table(rows)]
    unchanged = sum(op.status == "unchanged" for op in report.operators)
    blocks.append(Paragraph(inline(f"{unchanged} operator key(s) unchanged in all; every key "
                                   "is in report.json.")))
    return blocks


# --------------------------------------------------------------------------- framework ops


def _kernel_text(kernels) -> str:
    if not kernels:
        return "–"
    return " + ".join(f"{k.type} {fmt.us(k.device_us)}" for k in kernels[:4]) + \
        (f" + {len(kernels) - 4} more" if len(kernels) > 4 else "")


def _op_status(op) -> str:
    """A framework key's status with its pairing rung when it is not exact."""
    rung = {"data-inputs": " (data inputs)", "name": " (by name)"}.get(op.match_kind or "", "")
    return f"{op.status}{rung}"


def _op_shapes(op) -> str:
    """The key's shapes; base → new when the keys paired across other shapes."""
    if op.base_input_shapes and op.new_input_shapes and \
            op.base_input_shapes != op.new_input_shapes:
        return f"{fmt.shapes(op.base_input_shapes)} → {fmt.shapes(op.new_input_shapes)}"
    return fmt.shapes(op.input_shapes or "*")


def _rollup_table(rows, label: str, top_n: int) -> Table:
    return Table((label, "base /step", "new /step", "Δ", "status"), tuple(
        (cell(code(r.key)), cell(fmt.us(r.base_us), sort=r.base_us),
         cell(fmt.us(r.new_us), sort=r.new_us),
         cell(fmt.us(r.delta_us, signed=True), sort=r.delta_us), cell(r.status))
        for r in rows[:top_n]), sortable=True)


def _more(shown: int, total: int, what: str) -> list[Block]:
    rest = total - shown
    return [Paragraph(inline(f"{rest} more {what}; every one is in report.json."), "small")] \
        if rest > 0 else []


def _framework(report: Report) -> list[Block]:
    """By framework operator (aten::…), family and module: what CANN renames leave in place."""
    if report.framework_ops is None:
        if not report.framework_note:
            return []
        return [absent("By framework operator", report.framework_note.text)]
    ops = report.framework_ops
    summary = report.framework_summary
    shown = list(ops[: report.top_n])  # largest |Δ| first, whatever the status
    changed = summary.changed if summary else sum(op.status != "unchanged" for op in ops)
    rows = tuple((cell(code(op.name)), cell(code(_op_shapes(op))),
                  cell(f"{fmt.count(op.base_count)} → {fmt.count(op.new_count)}",
                       sort=op.new_count),
                  cell(fmt.us(op.base_device_us), sort=op.base_device_us),
                  cell(fmt.us(op.new_device_us), sort=op.new_device_us),
                  cell(fmt.us(op.delta_us, signed=True), sort=op.delta_us),
                  cell(fmt.pct(op.instance_change_pct), sort=op.instance_change_pct),
                  cell(_op_status(op)), cell(_kernel_text(op.base_kernels)),
                  cell(_kernel_text(op.new_kernels))) for op in shown)
    blocks: list[Block] = [section("By framework operator", "framework")]
    if summary and summary.sentence:
        blocks.append(Paragraph(inline(strong(summary.sentence))))
    blocks += [
        Paragraph(inline("Device time of the kernels each framework operator launched (trace "
                         "flows or the db's CONNECTION_IDS), the two runs aligned per step; "
                         "framework operators keep their names when CANN renames kernels, and "
                         "are judged by the kernel table's rules. ",
                         f"{changed} of {len(ops)} keys are not unchanged; the "
                         f"{len(shown)} that moved most are shown.")),
        Table(("framework op", "input shapes", "count /step", "base /step", "new /step", "Δ",
               "per instance", "status", "base kernels", "new kernels"), rows,
              sortable=True)]
    blocks += _more(len(shown), len(ops), "framework operator keys")
    blocks += [Paragraph(inline(note.text), "small") for note in report.framework_notes]
    families = [r for r in report.framework_rollup or () if r.level == "family"]
    if families:
        blocks += [section("By framework operator family", "framework-families"),
                   Paragraph(inline("All shapes and forms of one computation summed "
                                    "(in-place, out-of-place, foreach; mm and addmm are "
                                    "matmul), so that a rewrite reads as one line. Totals, "
                                    "not speed: increased/decreased at the threshold.")),
                   _rollup_table(families, "family", report.top_n)]
        blocks += _more(min(len(families), report.top_n), len(families), "families")
    if report.framework_modules:
        mods = list(report.framework_modules[: report.top_n])
        blocks += [section("By module", "modules"), Table(
            ("module", "ops /step", "base /step", "new /step", "Δ", "per instance",
             "status"),
            tuple((cell(code(m.module)),
                   cell(f"{fmt.count(m.base_count)} → {fmt.count(m.new_count)}"),
                   cell(fmt.us(m.base_device_us), sort=m.base_device_us),
                   cell(fmt.us(m.new_device_us), sort=m.new_device_us),
                   cell(fmt.us(m.delta_us, signed=True), sort=m.delta_us),
                   cell(fmt.pct(m.instance_change_pct), sort=m.instance_change_pct),
                   cell(m.status))
                  for m in mods), sortable=True)]
        blocks += _more(len(mods), len(report.framework_modules), "modules")
    return blocks


# --------------------------------------------------------------------------- groups, ranks


def _ratio(value) -> str:
    return "–" if fmt.is_missing(value) else f"{value:.2f}"


def _gbps(group, link: str) -> str:
    b, n = getattr(group, f"base_{link}_gbps"), getattr(group, f"new_{link}_gbps")

    def show(value) -> str:
        return "–" if fmt.is_missing(value) else f"{value:,.1f}"

    return f"{show(b)} → {show(n)}"


def _groups(report: Report) -> list[Block]:
    groups = report.comm_groups
    if not groups:
        return []

    def moved(g):
        return abs((g.new_elapse_us or 0) - (g.base_elapse_us or 0))

    rows = []
    for g in sorted(groups, key=moved, reverse=True)[: report.top_n]:
        links = ", ".join(f"{'PCIe' if link == 'pcie' else link.upper()} {_gbps(g, link)}"
                          for link in LINKS
                          if not (fmt.is_missing(getattr(g, f"base_{link}_gbps"))
                                  and fmt.is_missing(getattr(g, f"new_{link}_gbps"))))
        name = inline(code(fmt.shapes(str(g.group), 24)))
        if g.base_group and g.new_group and g.base_group != g.new_group:
            name = inline(code(fmt.shapes(str(g.base_group), 24)), " → ",
                          code(fmt.shapes(str(g.new_group), 24)), f" ({g.paired_by})")
        rows.append((cell(name),
                     cell(f"{fmt.count(g.base_ops)} → {fmt.count(g.new_ops)}", sort=g.new_ops),
                     cell(fmt.ms(g.base_elapse_us), sort=g.base_elapse_us),
                     cell(fmt.ms(g.new_elapse_us), sort=g.new_elapse_us),
                     cell(fmt.us(g.base_transit_us), sort=g.base_transit_us),
                     cell(fmt.us(g.new_transit_us), sort=g.new_transit_us),
                     cell(f"{_ratio(g.base_wait_ratio)} → {_ratio(g.new_wait_ratio)}",
                          sort=g.new_wait_ratio),
                     cell(links or "–")))
    return [section("Communication groups", "groups"),
            Paragraph(inline(f"Per group, per step and rank ({_group_source(groups)}): a "
                             "wait ratio that grows with flat transit means ranks wait for a "
                             "straggler; growing transit means more or slower transfer.")),
            Table(("group", "ops /step", "base ms", "new ms", "base transit", "new transit",
                   "wait ratio", "bandwidth GB/s base → new"), tuple(rows), sortable=True)]


def _group_source(groups) -> str:
    """Where the groups' transit and wait come from, in words."""
    sources = {g.base_parts_source for g in groups} | {g.new_parts_source for g in groups}
    sources.discard(None)
    if sources == {"hccl_tasks"}:
        return "transit and wait from the HCCL tasks of every plane; bandwidth from " \
            "communication.json"
    if "hccl_tasks" in sources:
        return "transit and wait from the HCCL tasks where the run has the group's tasks, " \
            "else communication.json (one plane); bandwidth from communication.json"
    return "communication.json"


def _rank_source(ranks) -> str:
    """Where the ranks' wait comes from, in words ("" when no rank has any)."""
    sources = {r.base_parts_source for r in ranks} | {r.new_parts_source for r in ranks}
    sources.discard(None)
    if sources == {"hccl_tasks"}:
        return " Wait is from the HCCL tasks of every plane."
    if "hccl_tasks" in sources:
        return (" Wait is from the HCCL tasks of every plane where a rank has them, else "
                "from communication.json (one plane).")
    return " Wait is communication.json's (one plane)." if sources else ""


def _ranks_section(report: Report, charts: Collection[str]) -> list[Block]:
    ranks = report.ranks
    if len(ranks) < 2:
        return []
    shown = sorted(ranks, key=lambda r: -abs(r.delta_stage_us or 0))[: report.top_n]
    rows = tuple((cell(str(r.rank), sort=r.rank),
                  cell(fmt.ms(r.base_stage), sort=r.base_stage),
                  cell(fmt.ms(r.new_stage), sort=r.new_stage),
                  cell(fmt.ms(r.delta_stage_us, signed=True), sort=r.delta_stage_us),
                  cell(fmt.ms(r.base_communication_not_overlapped),
                       sort=r.base_communication_not_overlapped),
                  cell(fmt.ms(r.new_communication_not_overlapped),
                       sort=r.new_communication_not_overlapped),
                  cell(fmt.ms(r.base_wait_us), sort=r.base_wait_us),
                  cell(fmt.ms(r.new_wait_us), sort=r.new_wait_us)) for r in shown)
    deltas = [r.delta_stage_us for r in ranks if not fmt.is_missing(r.delta_stage_us)]
    summary = ""
    if deltas:
        summary = (f"Across {len(ranks)} ranks: median Δ step "
                   f"{fmt.ms(statistics.median(deltas), True)} ms, largest "
                   f"{fmt.ms(max(deltas, key=abs), True)} ms.")
    more = f" Showing the {len(shown)} ranks that moved most; all are in report.json and " \
        "ranks.csv." if len(shown) < len(ranks) else ""
    blocks: list[Block] = [section("Per rank", "ranks")]
    said = (summary + more + _rank_source(ranks)).strip()
    if said:
        blocks.append(Paragraph(inline(said)))
    blocks.append(Table(("rank", "base step ms", "new step ms", "Δ ms", "base exposed",
                         "new exposed", "base wait", "new wait"), rows, sortable=True))
    if report.rank_notes:
        blocks.append(Paragraph(inline(" ".join(n.text for n in report.rank_notes))))
    if not deltas:
        blocks.append(absent("Per-rank change", "no rank is in both runs (base "
                                                f"{ranks_text(report.base.ranks)}; new "
                                                f"{ranks_text(report.new.ranks)}), so there is "
                                                "no change to chart."))
    blocks += [Chart(name, title) for name, title in
               (("rank_heatmap", "Per-rank change"), ("rank_steps", "Step per rank"))
               if name in charts]
    return blocks


# --------------------------------------------------------------------------- kernel time


def _kernel_time_cells(row: CategoryRow | FamilyRow) -> tuple[Cell, ...]:
    """Kernels per step, base and new time and Δ: the columns categories and families share."""
    return (cell(f"{fmt.count(row.base_count)} → {fmt.count(row.new_count)}",
                 sort=row.new_count),
            cell(fmt.ms(row.base_total_us), sort=row.base_total_us),
            cell(fmt.ms(row.new_total_us), sort=row.new_total_us),
            cell(fmt.ms(row.delta_us, signed=True), sort=row.delta_us))


def _categories(report: Report) -> list[Block]:
    if not report.categories:
        return []
    rows = tuple((cell(c.category), *_kernel_time_cells(c)) for c in report.categories)
    return [section("Kernel time by category", "categories"),
            Table(("category", "kernels /step", "base ms", "new ms", "Δ ms"), rows),
            Paragraph(inline("Kernel time is the sum of kernel durations; it can exceed the "
                             "step when streams overlap."))]


def _share(value) -> str:
    return "–" if fmt.is_missing(value) else f"{value:.1f}%"


def _families(report: Report, charts: Collection[str]) -> list[Block]:
    if not report.families:
        return []
    rows = tuple((cell(f.family), *_kernel_time_cells(f),
                  cell(fmt.pct(f.delta_pct), sort=f.delta_pct),
                  cell(f"{_share(f.base_share_pct)} → {_share(f.new_share_pct)}",
                       sort=f.new_share_pct))
                 for f in report.families)
    blocks: list[Block] = [
        section("Compute by family", "families"),
        Paragraph(inline("Kernel time per step split as msprof-analyze splits computing time: "
                         "MatMul / Cube, Vector, FlashAttention, Conv, SDMA / memcpy, AI CPU and "
                         "communication (the mapping is the table in "
                         "cann_diff/compare/families.py).")),
        Table(("family", "kernels /step", "base ms", "new ms", "Δ ms", "Δ%",
               "share base → new"), rows, sortable=True)]
    if "families" in charts:
        blocks.append(Chart("families", "Kernel time by compute family"))
    return blocks


# --------------------------------------------------------------------------- the report


def _side_warnings(report: Report) -> list[Block]:
    lines = tuple(inline(f"⚠ {side}: ", w.text) for side, ws in (("base", report.base.warnings),
                                                             ("new", report.new.warnings))
                  for w in ws)
    return [Warnings(lines)] if lines else []


def _comparability(report: Report) -> tuple[Inline, ...]:
    """What differs besides the stack: each value and where it was read."""
    if not report.comparability:
        return ()
    return (inline(strong("⚠ Not a like-for-like stack upgrade:"), " besides the software "
                   "stack, these differ; part of the change may be theirs."),
            *(inline(f"{c.what}: ", code(c.base), " → ", code(c.new), f" ({c.source})")
              for c in report.comparability))


def _verdict(report: Report) -> list[Block]:
    """The verdict's line, its causes largest first, and its caveats in one ⚠ block.

    The like-for-like caveat is said by the comparability lines (each value and its
    source), not again as a sentence.
    """
    v = report.verdict
    if v is None:  # a report built without its analysis: the headline alone
        return [Paragraph(inline(strong("Verdict:"), " ", report.headline), "verdict"),
                *([Warnings(_comparability(report))] if report.comparability else [])]
    blocks: list[Block] = [Paragraph(inline(strong("Verdict:"), " ", v.line, "."), "verdict")]
    if v.causes:
        blocks.append(Bullets(tuple(inline(strong(f"{c.name} {fmt.ms(c.delta_us, signed=True)} "
                                                  "ms"), f" ({fmt.share_of_change(c.share)})",
                                           f": {c.detail}" if c.detail else "")
                                    for c in v.causes), "causes"))
    if v.memory:
        blocks.append(Paragraph(inline(v.memory)))
    lines = tuple(inline("⚠ ", c.text) for c in v.caveats if c.code != LIKE_FOR_LIKE)
    lines += _comparability(report)
    return blocks + ([Warnings(lines)] if lines else [])


LIKE_FOR_LIKE = "not-like-for-like"


# Caveats that question the comparison itself: shown above the verdict.
NOT_COMPARABLE = ("excerpt", "unrelated")


def _not_comparable(report: Report) -> list[Block]:
    """Above the verdict: a side that is an excerpt, or runs that are not one workload."""
    lines = tuple(inline("⚠ ", n.text) for n in report.notes
                  if n.code in NOT_COMPARABLE)
    return [Warnings(lines)] if lines else []


def _memory(report: Report, charts: Collection[str]) -> list[Block]:
    if report.memory is None:
        return [absent("Device memory", "not recorded in either run (collect with "
                                        "profile_memory=True for memory_record.csv, "
                                        "operator_memory.csv and npu_module_mem.csv).")]
    return memory_blocks(report.memory, "memory" in charts)


def report_blocks(report: Report, charts: Collection[str] = ()) -> list[Block]:
    """The whole report as blocks; ``charts`` names the charts that were drawn."""
    notes = Footnotes()
    for warning in report.warnings:
        notes.mark(warning)
    blocks: list[Block] = [
        Heading(1, inline(f"cann-diff: {report.base.label} vs {report.new.label}")),
        *_not_comparable(report), *_verdict(report)]
    blocks += _side_warnings(report) + _findings(report) + provenance_blocks(report)
    blocks += _step(report, charts, notes) + free_blocks(report, charts) + _fusion(report)
    blocks += _communication(report) + collective_blocks(report)
    blocks += _operators(report, charts, notes) + why_blocks(report, charts)
    blocks += _framework(report) + _groups(report)
    blocks += _ranks_section(report, charts) + _categories(report)
    blocks += _families(report, charts) + _memory(report, charts)
    blocks += notes.blocks()
    t = report.thresholds
    blocks.append(Paragraph(inline(f"Generated by cann-diff. Thresholds: α = {t.alpha:g}, "
                                   f"minimum change {t.threshold_pct:g}%. Times are per step "
                                   "and per rank."), "footer"))
    return blocks
