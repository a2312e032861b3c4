"""The device-memory section of report.md (tabulate, GitHub tables).

It reads the report's ``MemoryComparison`` and does no arithmetic beyond formatting; the
chart is drawn in ``render/charts.py``.
"""

from __future__ import annotations

from tabulate import tabulate

from ..compare.memory import CopyChange, MemoryComparison, PeakChange

MISSING = "–"


def _mb(value: float | None) -> str:
    return MISSING if value is None else f"{value:,.1f}"


def _delta(value: float | None) -> str:
    return MISSING if value is None else f"{value:+,.1f}"


def _pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.1f} %"


def _count(value: float) -> str:
    text = f"{value:,.1f}"
    return text[:-2] if text.endswith(".0") else text


def _cell(text: str) -> str:
    """Keep a name from breaking a GitHub table: escape pipes, collapse newlines."""
    return " ".join(str(text).split()).replace("|", "\\|") or "(no name)"


def _table(headers: list[str], rows: list[list[str]], text_columns: int = 1) -> str:
    """GitHub table: the first ``text_columns`` and a trailing ``status`` left, figures right."""
    align = ["left"] * text_columns + ["right"] * (len(headers) - text_columns)
    if headers[-1] == "status":
        align[-1] = "left"
    return tabulate(rows, headers=headers, tablefmt="github", colalign=align,
                    disable_numparse=True)


def _peak_row(title: str, peak: PeakChange | None) -> list[str]:
    if peak is None:
        return [title, MISSING, MISSING, MISSING, MISSING]
    return [f"{title} ({peak.component})", _mb(peak.base_mb), _mb(peak.new_mb),
            _delta(peak.delta_mb), _pct(peak.delta_pct)]


def _peaks(comparison: MemoryComparison) -> list[str]:
    rows = [_peak_row("Peak reserved", comparison.peak_reserved),
            _peak_row("Peak allocated", comparison.peak_allocated)]
    lines = [_table(["", "base MB", "new MB", "Δ MB", "Δ %"], rows)]
    ranks = [p for p in (comparison.peak_reserved, comparison.peak_allocated) if p]
    if ranks and max(len(comparison.base_ranks), len(comparison.new_ranks)) > 1:
        where = "; ".join(f"{p.measure}: base rank {p.base_rank}, new rank {p.new_rank}"
                          for p in ranks)
        lines.append(f"\nPeaks are the maximum over ranks ({where}).")
    return lines


def _components(comparison: MemoryComparison) -> list[str]:
    if not comparison.components:
        return []
    rows = [[_cell(c["component"]), _mb(c["base_allocated_mb"]), _mb(c["new_allocated_mb"]),
             _mb(c["base_reserved_mb"]), _mb(c["new_reserved_mb"])]
            for c in comparison.components]
    headers = ["component", "base allocated MB", "new allocated MB", "base reserved MB",
               "new reserved MB"]
    return ["### Peak by component", "",
            "`APP`: all device memory of the process; `PTA`: torch_npu allocator; "
            "`GE`: graph engine; `PTA+GE`: the two together.", "",
            _table(headers, rows)]


def _operators(comparison: MemoryComparison) -> list[str]:
    title = "### Operator allocations"
    if not comparison.operators_compared:
        return [title, "", "No operator allocations recorded (operator_memory.csv)."]
    if not comparison.operators:
        return [title, "", f"No change in the allocations of the "
                           f"{comparison.operators_compared} operators."]
    rows = [[_cell(o.name), _count(o.base_count), _count(o.new_count), _mb(o.base_total_mb),
             _mb(o.new_total_mb), _delta(o.delta_mb), _pct(o.delta_pct),
             _mb(o.base_largest_mb), _mb(o.new_largest_mb), o.status]
            for o in comparison.operators]
    headers = ["operator", "base count", "new count", "base total MB", "new total MB", "Δ MB",
               "Δ %", "base largest MB", "new largest MB", "status"]
    shown = len(comparison.operators)
    return [title, "",
            f"Top {shown} of {comparison.operators_changed} changed operators (of "
            f"{comparison.operators_compared}) by |Δ total|; counts and totals per rank.", "",
            _table(headers, rows)]


def _modules(comparison: MemoryComparison) -> list[str]:
    if not comparison.modules:
        return []
    rows = [[_cell(m.module), _mb(m.base_peak_mb), _mb(m.new_peak_mb), _delta(m.delta_mb),
             _pct(m.delta_pct)] for m in comparison.modules]
    return ["### Memory by module (npu_module_mem, at peak)", "",
            _table(["module", "base MB", "new MB", "Δ MB", "Δ %"], rows)]


DIRECTION_NAMES = {"host_to_device": "host → device", "device_to_host": "device → host",
                   "device_to_device": "device → device", "other": "other",
                   "unknown": "direction unknown", "all": "**all copies**"}


def _num(value: float | None, digits: int = 1, sign: bool = False) -> str:
    if value is None:
        return MISSING
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def _copy_row(c: CopyChange) -> list[str]:
    return [DIRECTION_NAMES.get(c.direction, _cell(c.direction)),
            MISSING if c.base_count is None else _count(c.base_count),
            MISSING if c.new_count is None else _count(c.new_count),
            _num(c.base_time_us), _num(c.new_time_us), _num(c.delta_time_us, sign=True),
            _pct(c.delta_pct), _mb(c.base_mb), _mb(c.new_mb), _delta(c.delta_mb)]


def _copies(comparison: MemoryComparison) -> list[str]:
    if comparison.copies_total is None:
        return []
    rows = [_copy_row(c) for c in comparison.copies]
    if len(comparison.copies) != 1:
        rows.append(_copy_row(comparison.copies_total))
    headers = ["direction", "base count", "new count", "base µs", "new µs", "Δ µs", "Δ %",
               "base MB", "new MB", "Δ MB"]
    base_units, new_units = comparison.copy_units or (0, 0)
    return ["### Host↔device copies", "",
            f"Count and device time per step (mean over {base_units} base and {new_units} new "
            "(rank, step) units, from the memcpy kernels); MB per rank over the whole "
            "profile (db MEMCPY_INFO).", "",
            _table(headers, rows)]


def _hbm(comparison: MemoryComparison) -> list[str]:
    if not comparison.hbm:
        return []
    rows = []
    for h in comparison.hbm:
        rows.append([f"{h.direction} mean", _num(h.base_mean_gbps, 2), _num(h.new_mean_gbps, 2),
                     _num(h.delta_mean_gbps, 2, sign=True), _pct(h.delta_mean_pct)])
        rows.append([f"{h.direction} peak", _num(h.base_peak_gbps, 2), _num(h.new_peak_gbps, 2),
                     _num(h.delta_peak_gbps, 2, sign=True), _pct(h.delta_peak_pct)])
    samples = ", ".join(f"{h.direction}: {h.base_samples} base / {h.new_samples} new"
                        for h in comparison.hbm)
    return ["### HBM bandwidth", "",
            f"Device HBM bandwidth (all stacks summed), GB/s; samples {samples}.", "",
            _table(["", "base GB/s", "new GB/s", "Δ GB/s", "Δ %"], rows)]


def render_memory_markdown(comparison: MemoryComparison, chart_name: str | None) -> str:
    """Return the Markdown "Device memory" section; ``chart_name`` is a relative link or None.

    Sizes in MB. Warnings become a bullet list at the end of the section.
    """
    lines = ["## Device memory", ""]
    if comparison.headline:
        lines += [f"**{comparison.headline}**", ""]
    if comparison.growth:
        growth = comparison.growth
        lines += [f"> ⚠ `{growth['id']}` ({growth['severity']}): {growth['detail']}", ""]
    lines += [*_peaks(comparison), ""]
    if chart_name:
        lines += [f"![Reserved device memory over time, base vs new]({chart_name})", ""]
    for part in (_components(comparison), _operators(comparison), _modules(comparison),
                 _copies(comparison), _hbm(comparison)):
        if part:
            lines += [*part, ""]
    if comparison.warnings:
        lines += ["Notes:", "", *[f"- {_cell(w)}" for w in comparison.warnings], ""]
    return "\n".join(lines)
