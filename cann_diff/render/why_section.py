"""The "Why operators changed" section: each change of the kernels, with the time at stake.

The compare stage records per operator key the attributes of its kernels on both sides,
which changed, and the pipe that bounds them (``OperatorRow.attributes`` / ``bound`` /
``why``, compare/attributes.py). This section turns the keys around: per changed
attribute (core, block dim, formats, …), per bound shift (memory-bound → MTE3-bound) and
for the keys whose time moved with every recorded attribute alike ("the kernel itself"),
the keys and their Δ per step, the largest |Δ| first. Where a run does not record an
attribute or the pipes, it says so with the run's setting ("not recorded (Level0)",
"not recorded (aic_metrics=ACL_AICORE_NONE)"), never a guess.

A key with several changes is counted under each: the rows overlap, and their Δ do not
add up to the step's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd

from .. import format as fmt
from ..report.model import OperatorRow, Report, Side
from ..schema import ATTRIBUTE_LABELS, ATTRIBUTES, BOUND_WORDS, KERNEL_ITSELF, PIPE_LABELS
from .document import (
    Block,
    Bullets,
    Chart,
    Inline,
    Paragraph,
    Table,
    absent,
    cell,
    code,
    inline,
    section,
)

PER_INPUT = ("input_formats", "input_dtypes")
NOTHING_SEEN = "time moved, no recorded attribute changed"
MOVED = ("regressed", "improved")
EXAMPLES = 3  # keys named per row, largest |Δ| first
# Bound shifts with a row of their own, largest |Δ| first; the rest share one row: a
# shift of one small key each would bury the attributes.
BOUND_SHIFTS = 4
OTHER_SHIFTS = "bound: other shifts"
HEADERS = ("change", "keys", "base ms", "new ms", "Δ ms", "largest keys (base → new, Δ µs)")
INTRO = ("Per change of the operator keys' kernels (the modal value by kernel time on each "
         "side; an attribute changed when at least half of the key's kernel time runs with "
         "another value), the keys that carry it and their Δ per step, the largest |Δ| "
         "first. Δ is the keys' whole change, a count change included; a key with several "
         "changes counts under each, so the rows overlap. Bound: the pipe of the largest "
         "ratio (PMU busy share of the kernel time, aic_metrics=PipeUtilization).")


def value_text(attributes: Mapping[str, Any], side: str, attribute: str) -> str:
    """One side's modal value as a cell shows it: ``FRACTAL_NZ;FRACTAL_NZ`` → ``FRACTAL_NZ``."""
    held = attributes[side]
    if attribute == "implementation":
        named = held.get("implementations") or ()
        return str(named[0]["name"]) if named else "–"
    value = held.get(attribute)
    if value is None:
        return "–"
    text = str(value)
    return "/".join(dict.fromkeys(text.split(";"))) if attribute in PER_INPUT else text


def _recorded(attributes: Mapping[str, Any], side: str, attribute: str) -> bool:
    held = attributes[side]
    return bool(held.get("implementations")) if attribute == "implementation" \
        else held.get(attribute) is not None


def _bound_shift(bound: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(row label, values) of a key whose bounding pipe differs between the sides."""
    if not bound or not bound.get("base") or not bound.get("new") \
            or bound["base"] == bound["new"]:
        return None
    label = f"bound: {BOUND_WORDS[bound['base']]} → {BOUND_WORDS[bound['new']]}"
    values = (f"{PIPE_LABELS[bound['base']]} {bound['base_ratio']:.2f} → "
              f"{PIPE_LABELS[bound['new']]} {bound['new_ratio']:.2f}")
    return label, values


def _changes_of(op: OperatorRow) -> list[tuple[int, str, str]]:
    """(order, row label, the key's values) for each change ``op`` carries."""
    attributes = op.attributes
    if attributes is None:
        return []
    out = [(ATTRIBUTES.index(a), ATTRIBUTE_LABELS[a],
            f"{value_text(attributes, 'base', a)} → {value_text(attributes, 'new', a)}")
           for a in attributes.get("changed", ())]
    shift = _bound_shift(op.bound)
    if shift:
        out.append((len(ATTRIBUTES), *shift))
    if op.status in MOVED and not attributes.get("changed"):
        # The compare stage's own word, not its rule again (compare/attributes.py ``why``).
        alike = (op.why or "").startswith(KERNEL_ITSELF)
        out.append((len(ATTRIBUTES) + 1, KERNEL_ITSELF if alike else NOTHING_SEEN, ""))
    return out


COLUMNS = ["change", "keys", "base_us", "new_us", "delta_us", "examples"]


def _key_changes(ops: Sequence[OperatorRow]) -> pd.DataFrame:
    """One row per (key, change), largest |Δ| first per change.

    Columns: order, change, op_type, values, base_us, new_us, delta_us (µs per step, 0
    where unknown), size (|Δ|).
    """
    records = [{"order": order, "change": label, "op_type": op.op_type, "values": values,
                "base_us": op.base_total_us, "new_us": op.new_total_us,
                "delta_us": op.delta_us}
               for op in ops if not op.fusion for order, label, values in _changes_of(op)]
    keys = pd.DataFrame(records, columns=["order", "change", "op_type", "values", "base_us",
                                          "new_us", "delta_us"])
    times = ["base_us", "new_us", "delta_us"]
    keys[times] = keys[times].astype(float).fillna(0.0)
    keys["size"] = keys["delta_us"].abs()
    return keys.sort_values(["order", "size"], ascending=[True, False], kind="stable")


def _grouped(keys: pd.DataFrame) -> pd.DataFrame:
    """Per change: its keys, their sums and examples; the largest |Δ| first."""
    grouped = keys.groupby("change", sort=False)
    table = grouped.agg(order=("order", "first"), keys=("op_type", "size"),
                        base_us=("base_us", "sum"), new_us=("new_us", "sum"),
                        delta_us=("delta_us", "sum"))
    head = grouped.head(EXAMPLES)
    table["examples"] = pd.Series(list(zip(head["op_type"], head["values"], head["delta_us"])),
                                  index=head["change"]).groupby(level=0, sort=False).apply(tuple)
    table["size"] = table["delta_us"].abs()
    return table.sort_values(["size", "order"], ascending=[False, True], kind="stable")


def change_table(ops: Sequence[OperatorRow]) -> pd.DataFrame:
    """One row per change, the largest |Δ| first, then the attribute order.

    Columns ``change``, ``keys``, ``base_us``, ``new_us``, ``delta_us`` (sums over its
    keys, µs per step) and ``examples`` (the ``EXAMPLES`` keys of largest |Δ|: (op type,
    values, Δ µs)).

    Bound shifts past the ``BOUND_SHIFTS`` largest share the row ``OTHER_SHIFTS``.
    """
    keys = _key_changes(ops)
    if keys.empty:
        return pd.DataFrame(columns=COLUMNS)
    table = _grouped(keys)
    shifts = table.index[table["order"] == len(ATTRIBUTES)]
    if len(shifts) > BOUND_SHIFTS + 1:
        keys.loc[keys["change"].isin(shifts[BOUND_SHIFTS:]), "change"] = OTHER_SHIFTS
        table = _grouped(keys.sort_values(["order", "size"], ascending=[True, False],
                                          kind="stable"))
    return table.reset_index()[COLUMNS]


# --------------------------------------------------------------------------- not recorded


def _reason(report: Report, side: str, what: str) -> str:
    """Why ``side`` records no ``what`` (``attributes`` / ``pipes``).

    The compare stage's word when a key carries it, else the run's profiler level or
    aic_metrics.
    """
    said = next((op.attributes[side]["not_recorded"].get(what) for op in report.operators
                 if op.attributes is not None
                 and op.attributes[side].get("not_recorded", {}).get(what)), None)
    if said:
        return said
    run: Side = getattr(report, side)
    metrics = run.profiler_config.get("aic_metrics")
    level = run.profiler_level or run.profiler_config.get("level")
    if what == "pipes" and metrics:
        return f"aic_metrics={metrics}"
    return level if level == "Level0" else "not in this export"


def _not_recorded(reason: str) -> str:
    """``not recorded (Level0)``; a reason with its own brackets after a colon."""
    return f"not recorded: {reason}" if "(" in reason else f"not recorded ({reason})"


def missing_lines(report: Report) -> list[str]:
    """Per side, what it does not record and why: ``base: pipes (aic_metrics=…)``.

    A side saying the same as the other is said once, for both.
    """
    held = [op.attributes for op in report.operators if op.attributes is not None]
    said: dict[str, list[str]] = {}
    for side in ("base", "new"):
        parts = []
        absent_attributes = [ATTRIBUTE_LABELS[a] for a in ATTRIBUTES
                             if not any(_recorded(h, side, a) for h in held)]
        if absent_attributes:
            parts.append(f"{', '.join(absent_attributes)} "
                         f"{_not_recorded(_reason(report, side, 'attributes'))}")
        if not any(h[side].get("pipes") is not None for h in held):
            parts.append(f"pipes {_not_recorded(_reason(report, side, 'pipes'))}, so no "
                         "bound")
        if parts:
            said.setdefault("; ".join(parts), []).append(side)
    return [f"{' and '.join(sides)}: {text}" for text, sides in said.items()]


# --------------------------------------------------------------------------- blocks


def _examples_cell(examples: tuple) -> Inline:
    parts: list = []
    for i, (op_type, values, delta) in enumerate(examples):
        parts += ["; " if i else "", code(fmt.clip(fmt.visible(op_type), 40)),
                  f" {values}" if values else "", f" {fmt.us(delta, signed=True)}"]
    return inline(*parts)


def why_blocks(report: Report, charts: Collection[str] = ()) -> list[Block]:
    """The section: the ranked changes, what is not recorded, the pipes chart if drawn."""
    title = "Why operators changed"
    if not report.operators:
        return []
    missing = missing_lines(report)
    if all(op.attributes is None for op in report.operators):
        return [absent(title, "no kernel attribute is recorded in either run ("
                       + "; ".join(missing) + ").")]
    table = change_table(report.operators)
    blocks: list[Block] = [section(title, "why")]
    if table.empty:
        blocks.append(Paragraph(inline("No recorded attribute or bound changed on a key, and "
                                       "no key regressed or improved with its attributes "
                                       "alike.")))
    else:
        rows = tuple((cell(row.change), cell(str(row.keys), sort=row.keys),
                      cell(fmt.ms(row.base_us), sort=row.base_us),
                      cell(fmt.ms(row.new_us), sort=row.new_us),
                      cell(fmt.ms(row.delta_us, signed=True), sort=row.delta_us),
                      cell(_examples_cell(row.examples)))
                     for row in table.itertuples(index=False))  # one per change: few
        blocks += [Paragraph(inline(INTRO)), Table(HEADERS, rows, sortable=True,
                                                   prose=(HEADERS[-1],))]
    if missing:
        blocks.append(Bullets(tuple(inline(line) for line in missing)))
    if "pipes" in charts:
        blocks.append(Chart("pipes", "Pipe ratios of the top movers, base vs new"))
    return blocks
