"""Analyse stage: MC2 fused/split groups and verdicts (DESIGN.md "Finding ids").

The central verdict is ``comm-hides-compute``: computing got faster, exposed
communication grew, and the step did not gain what computing gained. When it comes
with an MC2 split (a fused compute+communication op run as MatMul + collective),
the finding says which fused op split and how to turn fusion back on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..compare import Comparison
from .base import FINDING_IDS, SEVERITY_ORDER, Finding
from .comm_hides_compute import comm_hides_compute
from .fusion import FusionGroup, detect_fusion, fusion_finding
from .operators import operator_findings
from .slow_rank import slow_ranks

__all__ = ["FINDING_IDS", "SEVERITY_ORDER", "Analysis", "Finding", "FusionGroup", "analyse"]


@dataclass(frozen=True)
class Analysis:
    """Fusion groups, findings, and the operator keys that belong to a fusion group."""

    fusion: tuple[FusionGroup, ...]
    findings: tuple[Finding, ...]
    fusion_keys: dict[int, str]


def analyse(cmp: Comparison, fusion_map: Path | None = None) -> Analysis:
    """Findings for a Comparison, most severe first."""
    groups, claimed = detect_fusion(cmp, fusion_map)
    findings = [fusion_finding(g) for g in groups]
    hidden = comm_hides_compute(cmp, groups, claimed)
    if hidden:
        findings.insert(0, hidden)
    findings += operator_findings(cmp, claimed)
    findings += slow_ranks(cmp)
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    return Analysis(tuple(groups), tuple(findings), claimed)
