"""The report's provenance: what each run was collected with, and how the report was made.

Per side the facts ``read/provenance.py`` found; an unknown fact says ``not recorded``
and names the file that would hold it (``n/a`` where the format cannot record it).
"""

from __future__ import annotations

from ..report import Report, Side
from .document import (
    Block,
    Cell,
    Collapsed,
    Paragraph,
    Table,
    cell,
    code,
    inline,
    plain_text,
    section,
)


def ranks_text(values) -> str:
    """Rank or step ids as text: all of up to 8, else the first, the last and how many."""
    if not values:
        return ""
    if len(values) > 8:
        return f"{values[0]}…{values[-1]} ({len(values)})"
    return ", ".join(str(v) for v in values)


def _when(iso: str | None) -> str | None:
    if not iso:
        return None
    if iso.endswith("Z"):
        return iso[:-1].replace("T", " ") + " UTC"
    return iso.replace("T", " ") + " (local time)"


def _where(side: Side, fact: str) -> tuple:
    """``not recorded (`file`: key)``, or ``n/a (why)`` where the format cannot record it."""
    source = side.sources.get(fact) or "no file names it"
    file, _, detail = source.partition(": ")
    if file == "n/a":
        return inline(f"n/a ({detail})")
    return inline("not recorded (", code(file), f": {detail})" if detail else ")")


def _recorded(side: Side, fact: str, value) -> Cell:
    if value is None or value == "":
        return cell(_where(side, fact))
    return cell(str(value))


def _device(side: Side) -> Cell:
    if side.device and side.device_count:
        return cell(f"{side.device} × {side.device_count}")
    hint = f"; PMU columns suggest {side.device_hint.split(' (')[0]}" \
        if side.device_hint else ""
    if side.device_count:
        return cell(f"{side.device_count} device(s), type ", _where(side, "device"), hint)
    if side.device:
        return cell(str(side.device))
    return cell(_where(side, "device"), hint)


# The profiler settings shown: those that cost host or device time, or change what is read.
SHOWN_SETTINGS = ("with_stack", "record_shapes", "profile_memory", "with_modules", "l2_cache",
                  "aic_metrics")


def _settings(side: Side) -> Cell:
    shown = [f"{k} {side.profiler_config[k]}" for k in SHOWN_SETTINGS
             if k in side.profiler_config]
    return cell(", ".join(shown)) if shown else cell(_where_detail(side, "profiler_config"))


def _algorithms(side: Side) -> Cell:
    shown = [f"{k} {v}" for k, v in sorted(side.hccl_algorithms.items())]
    return cell(", ".join(shown)) if shown else cell(_where_detail(side, "hccl_algorithms"))


def _where_detail(side: Side, fact: str) -> tuple:
    """``not recorded (…)`` for a fact whose file ``detail_sources`` names."""
    source = side.detail_sources.get(fact) or "no file names it"
    file, _, detail = source.partition(": ")
    if file == "n/a":
        return inline(f"n/a ({detail})")
    return inline("not recorded (", code(file), f": {detail})" if detail else ")")


def provenance_blocks(report: Report) -> list[Block]:
    """The table of both runs and the line naming the tool, thresholds and command."""
    b, n = report.base, report.new

    def row(name: str, make) -> tuple[Cell, ...]:
        return (cell(name), make(b), make(n))

    rows: tuple[tuple[Cell, ...], ...] = (row("label", lambda s: cell(s.label)),
            row("path", lambda s: cell(code(s.path))),
            row("format", lambda s: cell(s.format)),
            row("CANN", lambda s: _recorded(s, "cann", s.versions.cann)),
            row("torch_npu", lambda s: _recorded(s, "torch_npu", s.versions.torch_npu)),
            row("driver", lambda s: _recorded(s, "driver", s.driver)),
            row("device", _device),
            row("ranks", lambda s: cell(ranks_text(s.ranks) + (f" (world size {s.world_size})"
                                                           if s.world_size else ""))),
            row("steps", lambda s: cell(ranks_text(s.steps) or "whole run")),
            row("profiler level", lambda s: _recorded(s, "profiler_level", s.profiler_level)),
            row("collected", lambda s: _recorded(s, "collected", _when(s.collected))),
            row("host", lambda s: _recorded(s, "host", s.host)),
            row("step figures from", lambda s: cell(s.step_source)))
    # Megatron / MindSpeed facts, after the ranks: a row only when a side records them.
    job = tuple(row(name, lambda s, fact=fact: _recorded(s, fact, getattr(s, fact)))
                for name, fact in (("parallelism", "parallel"), ("environment", "environment"))
                if getattr(b, fact) or getattr(n, fact))
    recorded = tuple(row(name, make) for name, make, fact in (
        ("profiler settings", _settings, "profiler_config"),
        ("HCCL algorithm", _algorithms, "hccl_algorithms"))
        if getattr(b, fact) or getattr(n, fact))
    rows = rows[:8] + job + rows[8:10] + recorded + rows[10:]
    t = report.thresholds
    made = inline(f"Report by cann-diff {report.tool.version or '(version unknown)'} "
                  f"(α = {t.alpha:g}, minimum change {t.threshold_pct:g}%, "
                  f"{int(t.confidence * 100)}% confidence intervals)")
    if report.invocation is not None:
        when = {"collected": " (the newest collection time of the profiles)",
                "SOURCE_DATE_EPOCH": " (SOURCE_DATE_EPOCH)"}.get(
                    report.invocation.date_source, "")
        made = inline(made, ", run as ", code(report.invocation.command), "; dated ",
                      report.invocation.date, when)
    return [section("Runs compared", "runs"),
            Collapsed(_summary(rows), (Table(("", "base", "new"), rows),
                                       Paragraph(inline(made, "."), "small")))]


# Rows that always differ or name the runs: never "what differs".
NOT_COMPARED = ("label", "path")
# A value longer than this is named, not quoted, in the summary.
SHORT = 24
UNKNOWN = ("not recorded", "n/a")


def _summary(rows) -> tuple:
    """What the folded table holds: the facts that differ (short values quoted), then counts.

    ``CANN 7.0.1.3 → 8.0.RC2; collected differ · 6 the same · 3 not recorded on a side``.
    """
    differ, same, unknown = [], 0, 0
    for name_cell, base_cell, new_cell in rows:
        name = plain_text(name_cell.text)
        base, new = plain_text(base_cell.text), plain_text(new_cell.text)
        if name in NOT_COMPARED:
            continue
        if base.startswith(UNKNOWN) or new.startswith(UNKNOWN):
            unknown += 1
        elif base == new:
            same += 1
        else:
            quoted = max(len(base), len(new)) <= SHORT and name != "collected"
            differ.append(f"{name} {base} → {new}" if quoted else name)
    head = (f"{'; '.join(differ)} differ" if differ else "No recorded fact differs")
    counts = [f"{same} the same"] if same else []
    counts += [f"{unknown} not recorded on a side"] if unknown else []
    return inline(head, *(f" · {c}" for c in counts))
