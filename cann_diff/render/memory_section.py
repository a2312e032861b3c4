"""The device-memory section of the report, as document blocks (``document.py``).

It reads the report's ``Memory`` section and does no arithmetic beyond formatting; the
chart is drawn in ``render/charts.py``. ``markdown.render_memory_markdown`` gives the
section as Markdown on its own.
"""

from __future__ import annotations

from ..report.model import CopyChange, Memory, PeakChange
from .document import Block, Bullets, Chart, Heading, Paragraph, Table, cell, code, inline, strong

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


def _name(text: str) -> str:
    """A name as one line of text ("(no name)" when empty); renderers escape it."""
    return " ".join(str(text).split()) or "(no name)"


def _table(headers: list[str], rows: list[list], text_columns: int = 1,
           sortable: bool = False) -> Table:
    """The first ``text_columns`` and a trailing ``status`` left, figures right."""
    align = ["left"] * text_columns + ["right"] * (len(headers) - text_columns)
    if headers[-1] == "status":
        align[-1] = "left"
    cells = tuple(tuple(c if not isinstance(c, str) else cell(c) for c in row) for row in rows)
    return Table(tuple(headers), cells, tuple(align), sortable)


def _peak_row(title: str, peak: PeakChange) -> list:
    return [f"{title} ({peak.component})", cell(_mb(peak.base_mb), sort=peak.base_mb),
            cell(_mb(peak.new_mb), sort=peak.new_mb),
            cell(_delta(peak.delta_mb), sort=peak.delta_mb),
            cell(_pct(peak.delta_pct), sort=peak.delta_pct)]


def _peaks(comparison: Memory) -> list[Block]:
    peaks = [(title, p) for title, p in (("Peak reserved", comparison.peak_reserved),
                                         ("Peak allocated", comparison.peak_allocated)) if p]
    if not peaks:
        return [Paragraph(inline(strong("Peak memory:"), " not compared: at least one run "
                                 "recorded no memory samples (memory_record.csv, or the db's "
                                 "MEMORY_RECORD / NPU_MEM), so there is no peak and no "
                                 "timeline."), "absent")]
    blocks: list[Block] = [_table(["", "base MB", "new MB", "Δ MB", "Δ %"],
                                  [_peak_row(title, p) for title, p in peaks])]
    if max(len(comparison.base_ranks), len(comparison.new_ranks)) > 1:
        where = "; ".join(f"{p.measure}: base rank {p.base_rank}, new rank {p.new_rank}"
                          for _, p in peaks)
        blocks.append(Paragraph(inline(f"Peaks are the maximum over ranks ({where}).")))
    return blocks


def _components(comparison: Memory) -> list[Block]:
    if not comparison.components:
        return []
    rows = [[_name(c.component), _mb(c.base_allocated_mb), _mb(c.new_allocated_mb),
             _mb(c.base_reserved_mb), _mb(c.new_reserved_mb)]
            for c in comparison.components]
    headers = ["component", "base allocated MB", "new allocated MB", "base reserved MB",
               "new reserved MB"]
    return [Heading(3, inline("Peak by component")),
            Paragraph(inline(code("APP"), ": all device memory of the process; ", code("PTA"),
                             ": torch_npu allocator; ", code("GE"), ": graph engine; ",
                             code("PTA+GE"), ": the two together.")),
            _table(headers, rows)]


def _operators(comparison: Memory) -> list[Block]:
    title = Heading(3, inline("Operator allocations"))
    if not comparison.operators_compared:
        return [title, Paragraph(inline("No operator allocations recorded "
                                        "(operator_memory.csv)."))]
    if not comparison.operators:
        return [title, Paragraph(inline(f"No change in the allocations of the "
                                        f"{comparison.operators_compared} operators."))]
    rows = [[_name(o.name), cell(_count(o.base_count), sort=o.base_count),
             cell(_count(o.new_count), sort=o.new_count),
             cell(_mb(o.base_total_mb), sort=o.base_total_mb),
             cell(_mb(o.new_total_mb), sort=o.new_total_mb),
             cell(_delta(o.delta_mb), sort=o.delta_mb), cell(_pct(o.delta_pct), sort=o.delta_pct),
             cell(_mb(o.base_largest_mb), sort=o.base_largest_mb),
             cell(_mb(o.new_largest_mb), sort=o.new_largest_mb), o.status]
            for o in comparison.operators]
    headers = ["operator", "base count", "new count", "base total MB", "new total MB", "Δ MB",
               "Δ %", "base largest MB", "new largest MB", "status"]
    shown = len(comparison.operators)
    return [title,
            Paragraph(inline(f"Top {shown} of {comparison.operators_changed} changed operators "
                             f"(of {comparison.operators_compared}) by |Δ total|; counts and "
                             "totals per rank.")),
            _table(headers, rows, sortable=True)]


def _modules(comparison: Memory) -> list[Block]:
    if not comparison.modules:
        return []
    rows = [[_name(m.module), cell(_mb(m.base_peak_mb), sort=m.base_peak_mb),
             cell(_mb(m.new_peak_mb), sort=m.new_peak_mb),
             cell(_delta(m.delta_mb), sort=m.delta_mb), cell(_pct(m.delta_pct), sort=m.delta_pct)]
            for m in comparison.modules]
    return [Heading(3, inline("Memory by module (npu_module_mem, at peak)")),
            _table(["module", "base MB", "new MB", "Δ MB", "Δ %"], rows, sortable=True)]


DIRECTION_NAMES = {"host_to_device": "host → device", "device_to_host": "device → host",
                   "device_to_device": "device → device", "other": "other",
                   "unknown": "direction unknown"}


def _num(value: float | None, digits: int = 1, sign: bool = False) -> str:
    if value is None:
        return MISSING
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


def _copy_row(c: CopyChange) -> list:
    name = cell(strong("all copies")) if c.direction == "all" else \
        DIRECTION_NAMES.get(c.direction, _name(c.direction))
    return [name,
            MISSING if c.base_count is None else _count(c.base_count),
            MISSING if c.new_count is None else _count(c.new_count),
            _num(c.base_time_us), _num(c.new_time_us), _num(c.delta_time_us, sign=True),
            _pct(c.delta_pct), _mb(c.base_mb), _mb(c.new_mb), _delta(c.delta_mb)]


def _copies(comparison: Memory) -> list[Block]:
    if comparison.copies_total is None:
        return []
    rows = [_copy_row(c) for c in comparison.copies]
    if len(comparison.copies) != 1:
        rows.append(_copy_row(comparison.copies_total))
    headers = ["direction", "base count", "new count", "base µs", "new µs", "Δ µs", "Δ %",
               "base MB", "new MB", "Δ MB"]
    base_units, new_units = comparison.copy_units or (0, 0)
    return [Heading(3, inline("Host↔device copies")),
            Paragraph(inline(f"Count and device time per step (mean over {base_units} base and "
                             f"{new_units} new (rank, step) units, from the memcpy kernels); MB "
                             "per rank over the whole profile (db MEMCPY_INFO).")),
            _table(headers, rows)]


def _hbm(comparison: Memory) -> list[Block]:
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
    return [Heading(3, inline("HBM bandwidth")),
            Paragraph(inline(f"Device HBM bandwidth (all stacks summed), GB/s; samples "
                             f"{samples}.")),
            _table(["", "base GB/s", "new GB/s", "Δ GB/s", "Δ %"], rows)]


def has_timeline(comparison: Memory) -> bool:
    """True when either run has samples of a compared peak (reserved or allocated) to draw."""
    return any(series.time_ms for peak, series in (
        (comparison.peak_reserved, comparison.base_timeline),
        (comparison.peak_reserved, comparison.new_timeline),
        (comparison.peak_allocated, comparison.base_allocated_timeline),
        (comparison.peak_allocated, comparison.new_allocated_timeline)) if peak is not None)


def memory_blocks(comparison: Memory, chart: bool) -> list[Block]:
    """The "Device memory" section; ``chart``: memory.png was drawn. Sizes in MB."""
    blocks: list[Block] = [Heading(2, inline("Device memory"), "memory")]
    if comparison.headline:
        blocks.append(Paragraph(strong(comparison.headline)))
    if comparison.growth:
        growth = comparison.growth
        blocks.append(Paragraph(inline("⚠ ", code(growth["id"]), f" ({growth['severity']}): ",
                                       growth["detail"]), "warning"))
    blocks += _peaks(comparison)
    if chart:
        drawn = " and ".join(f"peak {p.measure} ({_name(p.component)})"
                             for p in (comparison.peak_reserved, comparison.peak_allocated) if p)
        blocks.append(Chart("memory", f"Device memory over time, base vs new: {drawn}"))
    for part in (_components(comparison), _operators(comparison), _modules(comparison),
                 _copies(comparison), _hbm(comparison)):
        blocks += part
    if comparison.warnings:
        blocks += [Paragraph(inline("Notes:")),
                   Bullets(tuple(inline(_name(w.text)) for w in comparison.warnings))]
    return blocks
