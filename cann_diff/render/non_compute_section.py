"""The non-compute sections: where the collectives' time went, who waits, where Free went.

They read the Report only (``communication[].parts``, ``collective_links``,
``collectives_skew``, ``free``) and say, beside each figure, where it came from: the
HCCL tasks see every plane, communication.json one.
"""

from __future__ import annotations

from collections.abc import Collection

from .. import format as fmt
from ..report import CommParts, Report
from .document import (
    Block,
    Chart,
    Paragraph,
    Table,
    Warnings,
    absent,
    cell,
    inline,
    section,
    strong,
)

SOURCES = (("hccl_tasks", "HCCL tasks"), ("communication.json", "communication.json"))


def _pair(base: float | None, new: float | None) -> tuple[str, float | None]:
    """``a → b`` in ms, sorted by the change; ``–`` for an unknown side."""
    if fmt.is_missing(base) and fmt.is_missing(new):
        return "–", None
    delta = None if fmt.is_missing(base) or fmt.is_missing(new) else new - base
    return f"{fmt.ms(base)} → {fmt.ms(new)}", delta


def _mb(base: float | None, new: float | None) -> str:
    def one(value):
        return "–" if fmt.is_missing(value) else f"{value:,.1f}"
    return "–" if fmt.is_missing(base) and fmt.is_missing(new) else f"{one(base)} → {one(new)}"


def _split_row(comm_type: str, source: str, base: CommParts | None, new: CommParts | None,
               algorithm: str):
    def get(parts: CommParts | None, name: str):
        return None if parts is None else getattr(parts, name)

    cells = [cell(comm_type), cell(source)]
    for name in ("elapsed_us", "transfer_us", "wait_us", "idle_us", "link_transfer_us"):
        text, delta = _pair(get(base, name), get(new, name))
        cells.append(cell(text, sort=delta))
    cells.append(cell(_mb(get(base, "link_mb"), get(new, "link_mb"))))
    cells.append(cell(algorithm))
    return tuple(cells)


def _algorithm(base: str | None, new: str | None) -> str:
    if not base and not new:
        return "–"
    return base or "–" if base == new else f"{base or '–'} → {new or '–'}"


def _splits(report: Report) -> list[Block]:
    rows = []
    for c in report.communication:
        if c.parts_source != "hccl_tasks":
            continue
        algorithm = _algorithm(c.base_algorithm, c.new_algorithm)
        for source, name in SOURCES:
            sides = c.parts.get(source, {})
            if sides:
                rows.append(_split_row(c.comm_type, name, sides.get("base"), sides.get("new"),
                                       algorithm if source == "hccl_tasks" else ""))
    if not rows:
        return []
    return [section("Where the collectives' time went", "collectives"),
            Paragraph(inline(
                "From the HCCL tasks of every plane (ms per step and rank, base → new): ",
                strong("transfer"), " is the time some plane moves data, ", strong("wait"),
                " the time some plane waits on a notify while none moves data, ",
                strong("idle"), " the time no plane has a task; elapsed = transfer + wait + "
                "idle + other. Link transfer sums each plane's transfers over a link (the "
                "link's busy time; copies within the chip left out), with their MB. "
                "communication.json's figures follow for comparison: it splits one plane, so a "
                "wait on another plane shows there as idle. The verdict uses the tasks.")),
            Table(("type", "source", "elapsed", "transfer", "wait", "idle", "link transfer",
                   "link MB", "algorithm"), tuple(rows), sortable=True)]


def _links(report: Report) -> list[Block]:
    if not report.collective_links:
        return []
    rows = []
    for link in report.collective_links:
        text, delta = _pair(link.base_transfer_us, link.new_transfer_us)
        rows.append((cell(link.comm_type), cell(link.link_type), cell(text, sort=delta),
                     cell(_mb(link.base_mb, link.new_mb))))
    return [Paragraph(inline(strong("By link type"), " (transfer over every plane's tasks of "
                             "that link, ms and MB per step and rank, base → new):")),
            Table(("type", "link", "transfer ms", "MB"), tuple(rows))]


def _skew(report: Report) -> list[Block]:
    if not report.collectives_skew:
        if report.skew_note:
            return [absent("Who waits for whom", report.skew_note)]
        return []
    rows = tuple((cell(s.side), cell(s.comm_type), cell(fmt.visible(s.group)),
                  cell(f"{s.instances}"), cell(fmt.ms(s.median_skew_us), sort=s.median_skew_us),
                  cell(fmt.ms(s.max_skew_us), sort=s.max_skew_us),
                  cell(_last(s)),
                  cell(fmt.ms(s.cost_us), sort=s.cost_us),
                  cell(fmt.ms(s.last_cost_us), sort=s.last_cost_us))
                 for s in report.collectives_skew)
    unseen = any(s.unprofiled for s in report.collectives_skew)
    look = (" Where the group holds ranks no profile holds, the last of the profiled ranks is "
            "not the one all wait for (below)." if unseen else "")
    blocks: list[Block] = [
        Paragraph(inline(
            strong("Who waits for whom."), " Each collective instance is matched across "
            "ranks by step, group, type and order; its skew is the last rank's start less "
            "the first's, and the waiting it costs is the mean over ranks of (last start − "
            "own start), ms per step and rank. The rank named is the one whose late "
            "arrivals cost most of it: look at its host and compute before the collective. "
            f"Ranks on different hosts compare host clocks.{look}")),
        Table(("run", "type", "group", "instances", "skew median", "skew max",
               "last to arrive", "waiting cost", "of it by that rank"), rows)]
    if report.skew_notes:
        blocks.append(Warnings(tuple(inline("⚠ ", n.text) for n in report.skew_notes)))
    return blocks


def _last(row) -> str:
    """The last rank to arrive; among the profiled ones only when the group holds more."""
    if row.unprofiled:
        return (f"rank {row.last_rank} (last of the {row.ranks} "
                f"profiled, {row.last_share:.0%} of instances)")
    return f"rank {row.last_rank} ({row.last_share:.0%} of instances)"


def collective_blocks(report: Report) -> list[Block]:
    """The collectives' split from their tasks, per link type, and the arrival skew."""
    splits = _splits(report)
    if not splits:
        return _skew(report) and [section("Who waits for whom", "skew"), *_skew(report)]
    return splits + _links(report) + _skew(report)


FREE_ROWS = (("free_us", "Free (device idle)"),
             ("host_bound_us", "of it host-bound (device waits for a launch)"),
             ("compile_us", "of the host-bound part, host op compilation (aclopCompile…)"),
             ("free_other_us", "of it other (synchronization, capture edges, …)"),
             ("host_busy_us", "host busy (ops on the launching threads)"),
             ("step_host_us", "host step (ProfilerStep span)"),
             ("dataloader_us", "dataloader"))


def _free_verdict(report: Report) -> str:
    free = report.free
    assert free is not None
    grown = (free.new.free_us or 0.0) - (free.base.free_us or 0.0)
    settings = (" The host-costly profiler settings differ: " + "; ".join(free.settings)
                + "." if free.settings else "")
    if free.host_bound_share is None:
        return f"Free did not grow ({fmt.ms(grown, signed=True)} ms per step).{settings}"
    bound = (free.new.host_bound_us or 0.0) - (free.base.host_bound_us or 0.0)
    word = "Host-bound" if free.host_bound else "Not host-bound"
    return (f"{word}: Free grew {fmt.ms(grown)} ms per step, "
            f"{fmt.ms(bound, signed=True)} ms of it ({free.host_bound_share:.0%}) the device "
            f"waiting for the host's launches.{settings}")


def _launched(free) -> str:
    """`` Launches timed from: …`` naming each run's source, or ``""``."""
    base, new = free.launch_source.get("base", ""), free.launch_source.get("new", "")
    if not base and not new:
        return ""
    said = base if base == new else f"{base or '–'} (base), {new or '–'} (new)"
    return f" Launches are timed from: {said}."


def free_blocks(report: Report, charts: Collection[str]) -> list[Block]:
    """Where Free went, from the host side of the trace, and the picture of one step."""
    blocks: list[Block] = []
    if report.free is not None:
        free = report.free
        rows = []
        for name, label in FREE_ROWS:
            base, new = getattr(free.base, name), getattr(free.new, name)
            if name == "compile_us" and fmt.is_missing(base) and fmt.is_missing(new):
                continue  # neither run records host op compilation
            delta = None if fmt.is_missing(base) or fmt.is_missing(new) else new - base
            rows.append((cell(label), cell(fmt.ms(base), sort=base), cell(fmt.ms(new), sort=new),
                         cell("–" if delta is None else fmt.ms(delta, signed=True), sort=delta)))
        blocks += [section("Where Free went", "free"),
                   Paragraph(inline(strong(_free_verdict(report)), " From the host side of "
                                    "the trace (ms per step and rank): the host-bound part of "
                                    "a device gap is the part before the host launched the "
                                    f"task that ends it.{_launched(free)}")),
                   Table(("ms per step", "base", "new", "Δ"), tuple(rows))]
    if "step_timeline" in charts:
        if not blocks:
            blocks.append(section("One step, side by side", "timeline"))
        blocks.append(Chart("step_timeline", "The median step of base and new on one time "
                                             "axis, lane by lane"))
    return blocks
