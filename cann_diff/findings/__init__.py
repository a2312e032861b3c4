"""Analyse stage: MC2 fused/split groups and verdicts (DESIGN.md "Finding ids").

The central verdict is ``comm-hides-compute``: computing got faster, exposed
communication grew, and the step did not gain what computing gained. When it comes
with an MC2 split (a fused compute+communication op run as MatMul + collective),
the finding says which fused op split and how to turn fusion back on. Every figure
about Computing comes from one arithmetic, ``ComputeSplit`` (compute_split.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..compare import Comparison
from ..vocab import Vocabulary
from .base import FINDING_IDS, SEVERITY_ORDER, Finding
from .comm_hides_compute import comm_hides_compute
from .compute_split import ComputeSplit, split_computing
from .fusion import FusionGroup, claimed_instances, detect_fusion, fusion_finding
from .operators import operator_findings
from .slow_rank import slow_ranks

__all__ = ["FINDING_IDS", "SEVERITY_ORDER", "Analysis", "ComputeSplit", "Finding",
           "FusionGroup", "analyse"]


@dataclass(frozen=True)
class Analysis:
    """Fusion groups, findings, and the operator keys fusion groups claim.

    ``fusion_keys`` maps the keys a group claims entirely (every instance on both sides)
    to its fused type; ``compute`` is the split of Δ Computing (None only when an
    Analysis is rebuilt without it: copy with ``dataclasses.replace``).
    """

    fusion: tuple[FusionGroup, ...]
    findings: tuple[Finding, ...]
    fusion_keys: dict[int, str]
    compute: ComputeSplit | None = None

    @property
    def fusion_claims(self) -> tuple[dict[int, float], dict[int, float]]:
        """Instances per step claimed by fusion groups, per key: (base side, new side)."""
        return claimed_instances(list(self.fusion))


def analyse(cmp: Comparison, vocab: Vocabulary | None = None) -> Analysis:
    """Findings for a Comparison, most severe first (``vocab``: its fusion table)."""
    groups, claimed = detect_fusion(cmp, vocab)
    compute = split_computing(cmp, groups)
    findings = [fusion_finding(g) for g in groups]
    hidden = comm_hides_compute(cmp, groups, compute)
    if hidden:
        findings.insert(0, hidden)
    findings += operator_findings(cmp, claimed, groups)
    findings += slow_ranks(cmp)
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    return Analysis(tuple(groups), tuple(findings), claimed, compute)
