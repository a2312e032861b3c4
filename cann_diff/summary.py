"""Several candidates against one baseline: the summary of their pairwise Reports.

An upgrade is rarely one pair: teams choose between CANN 8.0.RC2 and 8.0.RC3, or MC2 on
and off, against one baseline. Each candidate gets its full pairwise ``Report``; this
module builds the one-column-per-candidate ``Summary`` from them (it computes nothing the
pairwise reports do not already hold) and the verdict across candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from . import format as fmt
from .report import SCHEMA, Figure, FindingRow, Report, ReportSettings, Side, StepResult, to_json

MOVERS = 15  # operator rows in the operator × candidate table


@dataclass(frozen=True)
class Candidate:
    """One candidate's column: its step figures, MC2 state, findings and memory peak.

    ``report`` is the pairwise report's directory relative to the summary's output
    directory; ``gate_failed`` is None when no gate was asked for.
    """

    label: str
    path: str
    report: str
    step: StepResult
    computing: Figure
    exposed_communication: Figure
    free: Figure
    fusion: str
    findings: tuple[FindingRow, ...]
    peak_reserved_mb: float | None
    peak_reserved_delta_pct: float | None
    gate_failed: bool | None


@dataclass(frozen=True)
class Mover:
    """One operator key's Δ time per step (µs) in each candidate (None: not in that pair)."""

    op_type: str
    input_shapes: str
    base_total_us: float | None
    delta_us: tuple[float | None, ...]
    status: tuple[str | None, ...]


@dataclass(frozen=True)
class Summary:
    """The baseline, one column per candidate, the verdict across them, the top movers."""

    base: Side
    candidates: tuple[Candidate, ...]
    verdict: str
    movers: tuple[Mover, ...]
    thresholds: ReportSettings
    gate_pct: float | None

    def to_dict(self) -> dict:
        """Summary report.json: ``candidates[]`` with ``label, path, report, step, findings``."""
        data = {f.name: to_json(getattr(self, f.name)) for f in fields(self)}
        return {"schema": SCHEMA, "kind": "summary", **data}


def fusion_state(report: Report) -> str:
    """MC2 fusion in one phrase: which fused ops split or fused, or ``unchanged``."""
    if not report.fusion:
        return "unchanged"
    return "; ".join(f"{g.fused_type} {'split' if g.direction == 'split' else 'fused'}"
                     for g in report.fusion)


def _candidate(report: Report, directory: str, gate_failed: bool | None) -> Candidate:
    memory = report.memory
    peak = memory.peak_reserved if memory is not None else None
    breakdown = report.step.breakdown
    return Candidate(report.new.label, report.new.path, directory, report.step,
                     breakdown.computing, breakdown.communication_not_overlapped,
                     breakdown.free, fusion_state(report), report.findings,
                     peak.new_mb if peak else None, peak.delta_pct if peak else None,
                     gate_failed)


def _movers(reports: list[Report], limit: int = MOVERS) -> tuple[Mover, ...]:
    """The operator keys that moved most in any candidate, largest |Δ| first."""
    keys: dict[tuple[str, str], dict] = {}
    for column, report in enumerate(reports):
        for op in report.operators:
            entry = keys.setdefault((op.op_type, op.input_shapes),
                                    {"base": op.base_total_us or None, "delta": {},
                                     "status": {}})
            entry["delta"][column] = op.delta_us
            claimed = op.fusion or op.base_claimed or op.new_claimed
            entry["status"][column] = "mc2" if claimed else op.status
    ranked = sorted(keys.items(), key=lambda kv: (-max(abs(d or 0) for d in
                                                       kv[1]["delta"].values()), kv[0]))
    n = len(reports)
    return tuple(Mover(op_type, shapes, entry["base"],
                       tuple(entry["delta"].get(i) for i in range(n)),
                       tuple(entry["status"].get(i) for i in range(n)))
                 for (op_type, shapes), entry in ranked[:limit])


def _describe(candidate: Candidate) -> str:
    step = candidate.step
    if step.status == "regressed":
        why = f", {candidate.fusion}" if candidate.fusion != "unchanged" else ""
        return f"{candidate.label} is {abs(step.delta_pct or 0.0):.1f}% slower{why}"
    if step.status == "improved":
        return f"{candidate.label} is {abs(step.delta_pct or 0.0):.1f}% faster"
    return f"{candidate.label} is unchanged ({fmt.pct(step.delta_pct)})"


def verdict(base_label: str, candidates: tuple[Candidate, ...]) -> str:
    """One sentence across candidates: which are not slower than the baseline, and why not."""
    fine = [c for c in candidates if c.step.status != "regressed"]
    slow = [c for c in candidates if c.step.status == "regressed"]
    if not slow:
        return (f"No candidate is slower than {base_label}: "
                + "; ".join(_describe(c) for c in candidates) + ".")
    if not fine:
        return (f"Every candidate is slower than {base_label}: "
                + "; ".join(_describe(c) for c in candidates) + ".")
    names = " and ".join(c.label for c in fine)
    return (f"Only {names} {'is' if len(fine) == 1 else 'are'} not slower than {base_label}: "
            + "; ".join(_describe(c) for c in slow + fine) + ".")


def build_summary(reports: list[Report], directories: list[str],
                  gate_failed: Sequence[bool | None], gate_pct: float | None = None) -> Summary:
    """The Summary of pairwise reports that share one baseline (in candidate order)."""
    if not reports:
        raise ValueError("a summary needs at least one candidate report")
    candidates = tuple(_candidate(r, d, g) for r, d, g in zip(reports, directories,
                                                                gate_failed))
    base = reports[0].base
    return Summary(base, candidates, verdict(base.label, candidates), _movers(reports),
                   reports[0].thresholds, gate_pct)
