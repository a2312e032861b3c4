"""A ladder: profiles as ordered steps of one upgrade path, and which rung moved what.

Built from the pairwise reports of consecutive profiles (the rungs) and of the first
against the last (the gate), as the candidates summary is: it computes nothing the
rungs do not hold, so every figure is a pairwise report's.

What moved at a rung, and how it is classed (``LAYERS``):

* a step part the rung's verdict names as a cause (``verdict.causes``: computing, exposed
  communication, Free, Bubble, Preparing) — computing as its compute split says (``kernel``
  when like-for-like kernels hold most of it, ``graph`` when changed work or MC2 does),
  exposed communication and Bubble as ``communication``, Free and Preparing as
  ``dispatch``; a rung whose step did not change names none (noise does not speak);
* an operator key (family and input shapes, so a rename is one key along the path) that
  regressed or improved per instance — ``implementation`` when its kernel, formats,
  dtypes, HF32 or op state changed, ``placement`` when its core or block dims did, else
  ``kernel``; a collective's row is ``communication``; a key added, removed or run a
  different number of times, holding at least ``GRAPH_SHARE`` of the rung's step, is
  ``graph`` (``communication`` for a collective);
* an MC2 fused op split or fused (``graph``).

Each item is attributed to the rung where it first moved; a later rung moving it the
other way undoes it (``undone_at``), and both are reported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .. import format as fmt
from ..compare.attributes import PLACEMENT
from .json_form import SCHEMA, fields_json
from .model import CauseRow, OperatorRow, Report, ReportSettings, StepResult

LAYERS = ("kernel", "placement", "implementation", "dispatch", "graph", "communication")
# An added, removed or count-changed key names a rung when it holds this share of the
# rung's base step: smaller ones are listed in the rung's own report.
GRAPH_SHARE = 0.01
IMPLEMENTATION = ("implementation", "input_formats", "input_dtypes", "hf32", "op_state")
PART_LAYERS = {"exposed communication": "communication", "Bubble": "communication",
               "Free (device idle)": "dispatch"}
GRAPH_ROWS = ("count_changed_us", "added_us", "removed_us", "reshaped_us", "mc2_us")


@dataclass(frozen=True)
class Move:
    """One item's move at one rung: its Δ (µs per step) and what the rung says of it."""

    rung: int
    delta_us: float
    layer: str
    detail: str = ""


@dataclass(frozen=True)
class LadderChange:
    """An item that moved along the path: where it first moved, and whether it was undone.

    ``kind``: ``part`` (of the step), ``operator``, ``collective`` or ``fusion``;
    ``moves``: every rung that moved it, in order; ``undone_at`` the first later rung that
    moved it the other way (None: it stands).
    """

    item: str
    kind: str
    layer: str
    rung: int
    delta_us: float
    detail: str
    moves: tuple[Move, ...]
    undone_at: int | None


@dataclass(frozen=True)
class Rung:
    """One step of the path: the pairwise report of a profile against the one before it.

    ``name`` says what changed on this rung (the versions that differ, else the label);
    ``causes`` are the rung verdict's; ``sentence`` the rung's verdict in the summary.
    """

    index: int
    base: str
    new: str
    name: str
    report: str
    step: StepResult
    causes: tuple[CauseRow, ...]
    sentence: str


@dataclass(frozen=True)
class LadderSummary:
    """The whole path: the profiles, each rung, the gate (first vs last), what moved where.

    ``parts`` holds each profile's step parts (µs per step: ``computing``,
    ``communication_not_overlapped``, ``free``, ``stage``) as the rungs' step tables show
    them (the first from rung 1's base side, each other from its rung's new side).
    """

    labels: tuple[str, ...]
    rungs: tuple[Rung, ...]
    gate: Rung
    changes: tuple[LadderChange, ...]
    parts: tuple[Mapping[str, float | None], ...]
    verdict: str
    thresholds: ReportSettings
    gate_pct: float | None = None
    gate_failed: bool | None = None

    def to_dict(self) -> dict:
        """Ladder report.json: ``kind: "ladder"``, the rungs, the gate and the changes."""
        return {"schema": SCHEMA, "kind": "ladder", **fields_json(self)}


# --------------------------------------------------------------------------- moves


def _computing_layer(report: Report) -> str:
    """``kernel`` when like-for-like kernels hold most of Δ Computing, else ``graph``."""
    rows = {row.part: row.delta_us or 0.0 for row in (report.compute.rows if report.compute
                                                      else ())}
    like = abs(rows.get("like_for_like_us", 0.0))
    changed = max((abs(rows.get(name, 0.0)) for name in GRAPH_ROWS), default=0.0)
    return "graph" if changed > like else "kernel"


def _part_moves(report: Report, rung: int) -> list[tuple[tuple[str, str], Move]]:
    if report.verdict is None:
        return []
    out = []
    for cause in report.verdict.causes:
        layer = _computing_layer(report) if cause.name == "computing" else \
            PART_LAYERS.get(cause.name, "dispatch")
        out.append((("part", cause.name), Move(rung, cause.delta_us, layer, cause.detail)))
    return out


def _operator_layer(op: OperatorRow) -> str:
    changed = set((op.attributes or {}).get("changed") or ())
    if changed & set(IMPLEMENTATION):
        return "implementation"
    if changed & set(PLACEMENT):
        return "placement"
    return "kernel"


def _operator_moves(report: Report, rung: int) -> list[tuple[tuple[str, str], Move]]:
    step = report.step.base_us or 0.0
    out = []
    for op in report.operators:
        if op.fusion or op.base_claimed or op.new_claimed:
            continue  # an MC2 group's keys: its fusion move says it
        collective = op.category == "communication"
        name = op.op_type if collective else f"{op.family} [{op.input_shapes}]"
        kind = "collective" if collective else "operator"
        if op.status in ("regressed", "improved"):
            layer = "communication" if collective else _operator_layer(op)
            detail = f"{fmt.pct(op.instance_change_pct)} per instance, {op.status}" + (
                f"; {op.why}" if op.why else "")
        elif op.status in ("added", "removed", "count-changed") and step > 0 and \
                abs(op.delta_us) >= GRAPH_SHARE * step:
            layer = "communication" if collective else "graph"
            detail = {"added": "only in the new run", "removed": "only in the base run"}.get(
                op.status, f"{fmt.count(op.base_count)} → {fmt.count(op.new_count)} per step")
        else:
            continue
        out.append(((kind, name), Move(rung, op.delta_us, layer, detail)))
    return out


def _fusion_moves(report: Report, rung: int) -> list[tuple[tuple[str, str], Move]]:
    out = []
    for g in report.fusion:
        exposed = f"{fmt.ms(abs(g.exposed_us))} ms of exposed communication"
        detail = (f"{g.fused_type} split into {' + '.join(g.split_types)} ({exposed} added)"
                  if g.direction == "split" else
                  f"{g.fused_type} fused again ({exposed} gone)")
        out.append((("fusion", f"{g.fused_type} fusion"), Move(rung, g.delta_us, "graph",
                                                               detail)))
    return out


def _merged(first: Move, second: Move) -> Move:
    """Two moves of one item on one rung (keys of one family and shapes) as one: Δ summed."""
    larger = first if abs(first.delta_us) >= abs(second.delta_us) else second
    return Move(first.rung, first.delta_us + second.delta_us, larger.layer,
                "; ".join(d for d in (first.detail, second.detail) if d))


def _changes(reports: Sequence[Report]) -> tuple[LadderChange, ...]:
    """Every item that moved, with the rung it first moved on, largest first move first."""
    moves: dict[tuple[str, str], list[Move]] = {}
    for rung, report in enumerate(reports, 1):
        for key, move in (_part_moves(report, rung) + _operator_moves(report, rung)
                          + _fusion_moves(report, rung)):
            found = moves.setdefault(key, [])
            if found and found[-1].rung == rung:  # two keys of one family and shapes
                found[-1] = _merged(found[-1], move)
            else:
                found.append(move)
    changes = []
    for (kind, item), found in moves.items():
        first = found[0]
        undone = next((m.rung for m in found[1:]
                       if math.copysign(1.0, m.delta_us) != math.copysign(1.0, first.delta_us)),
                      None)
        changes.append(LadderChange(item, kind, first.layer, first.rung, first.delta_us,
                                    first.detail, tuple(found), undone))
    kinds = {"part": 0, "fusion": 1, "collective": 2, "operator": 3}
    changes.sort(key=lambda c: (kinds[c.kind], c.rung, -abs(c.delta_us), c.item))
    return tuple(changes)


# --------------------------------------------------------------------------- sentences


def rung_name(report: Report) -> str:
    """What changed on a rung: the new label, and the recorded versions that differ."""
    b, n = report.base.versions, report.new.versions
    differ = [f"{what} {old} → {new}" for what, old, new in (("CANN", b.cann, n.cann),
                                                              ("torch_npu", b.torch_npu,
                                                               n.torch_npu))
              if old and new and old != new]
    return report.new.label + (f": {', '.join(differ)}" if differ else "")


def _step_phrase(step: StepResult) -> str:
    figures = f"{fmt.ms(step.base_us)} → {fmt.ms(step.new_us)} ms per step"
    p = f", {fmt.p_phrase(step.p_value)}" if step.p_value is not None else ""
    if step.status == "regressed":
        return f"is {abs(step.change_pct or 0.0):.1f}% slower ({figures}{p})"
    if step.status == "improved":
        return f"is {abs(step.change_pct or 0.0):.1f}% faster ({figures}{p})"
    return (f"does not change the step beyond the threshold ({figures}, "
            f"{fmt.pct(step.change_pct)}{p})")


def _reversal(change: LadderChange | None, rung: int) -> str:
    if change is None or change.rung == rung or change.undone_at != rung:
        return ""
    return f", giving back rung {change.rung}'s {fmt.ms(change.delta_us, signed=True)} ms"


def _rung_sentence(index: int, report: Report,
                   changes: Mapping[tuple[str, str], LadderChange]) -> str:
    head = f"Rung {index} ({rung_name(report)}) {_step_phrase(report.step)}"
    causes = report.verdict.causes if report.verdict is not None else ()
    if not causes:
        return head
    said = []
    for cause in causes:
        change = changes.get(("part", cause.name))
        layer = _move_at(change, index).layer if change is not None else ""
        said.append(f"{cause.name} {fmt.ms(cause.delta_us, signed=True)} ms"
                    + (f" [{layer}]" if layer else "")
                    + _reversal(change, index))
    tail = _fusion_at(changes.values(), index)
    return f"{head}: {', '.join(said)}" + (f"; {tail}" if tail else "")


def _move_at(change: LadderChange, rung: int) -> Move:
    """The change's move at ``rung`` (a part a rung's verdict names always has one)."""
    return next(m for m in change.moves if m.rung == rung)


def _fusion_at(changes, rung: int) -> str:
    """What the rung did to MC2 fused ops, in words, or ``""``."""
    return "; ".join(m.detail for c in changes if c.kind == "fusion"
                     for m in c.moves if m.rung == rung)


def _path_verdict(labels: Sequence[str], rungs: Sequence[Rung], gate: Rung,
                  changes: Sequence[LadderChange]) -> str:
    steps = [rungs[0].step.base_us, *(r.step.new_us for r in rungs)]
    path = " → ".join(fmt.ms(s) for s in steps)
    overall = gate.step
    if overall.status in ("regressed", "improved"):
        word = "slower" if overall.status == "regressed" else "faster"
        head = (f"Along {' → '.join(labels)} the step goes {path} ms: {labels[-1]} is "
                f"{abs(overall.change_pct or 0.0):.1f}% {word} than {labels[0]}")
    else:
        head = (f"Along {' → '.join(labels)} the step goes {path} ms: {labels[-1]} is not "
                f"slower or faster than {labels[0]} beyond the threshold "
                f"({fmt.pct(overall.change_pct)})")
    said = []
    for rung in rungs:
        moved = [c for c in changes if c.kind == "part" and c.rung == rung.index]
        back = [c for c in changes if c.kind == "part" and c.undone_at == rung.index]
        fused = _fusion_at(changes, rung.index)
        pieces = []
        if moved:
            top = max(moved, key=lambda c: abs(c.delta_us))
            verb = "adds {} ms of" if top.delta_us > 0 else "takes {} ms off"
            pieces.append(f"{verb.format(fmt.ms(abs(top.delta_us)))} {top.item} "
                          f"[{top.layer}]")
        for change in back:
            pieces.append(f"gives back rung {change.rung}'s {change.item} "
                          f"({fmt.ms(_move_at(change, rung.index).delta_us, signed=True)} ms)")
        if pieces:
            said.append(f"rung {rung.index} ({rung.new}) {' and '.join(pieces)}"
                        + (f": {fused}" if fused else ""))
    return head + (f"; {'; '.join(said)}." if said else "; no rung moved the step.")


def build_ladder(reports: Sequence[Report], gate: Report, directories: Sequence[str],
                 gate_directory: str, gate_pct: float | None = None,
                 gate_failed: bool | None = None) -> LadderSummary:
    """The LadderSummary of the rungs' reports (in path order) and the gate's report."""
    if len(reports) < 2:
        raise ValueError("a ladder needs at least two rungs")
    changes = _changes(reports)
    by_item = {(c.kind, c.item): c for c in changes}
    labels = (reports[0].base.label, *(r.new.label for r in reports))
    rungs = tuple(Rung(i, r.base.label, r.new.label, rung_name(r), d, r.step,
                       r.verdict.causes if r.verdict is not None else (),
                       _rung_sentence(i, r, by_item))
                  for i, (r, d) in enumerate(zip(reports, directories), 1))
    whole = Rung(0, gate.base.label, gate.new.label, rung_name(gate), gate_directory,
                 gate.step, gate.verdict.causes if gate.verdict is not None else (),
                 gate.verdict.line if gate.verdict is not None else gate.headline)
    parts = tuple({"computing": side(r.step.breakdown.computing),
                   "communication_not_overlapped":
                       side(r.step.breakdown.communication_not_overlapped),
                   "free": side(r.step.breakdown.free),
                   "stage": r.step.base_us if side is _base else r.step.new_us}
                  for r, side in [(reports[0], _base), *((r, _new) for r in reports)])
    return LadderSummary(labels, rungs, whole, changes, parts,
                         _path_verdict(labels, rungs, whole, changes), reports[0].thresholds,
                         gate_pct, gate_failed)


def _base(figure) -> float | None:
    return figure.base_us


def _new(figure) -> float | None:
    return figure.new_us
