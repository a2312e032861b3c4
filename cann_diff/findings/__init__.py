"""Analyse stage: MC2 fused/split groups, verdicts and the headline.

Finding ids and when each is raised: docs/design.md "Finding ids". The central verdict
is ``comm-hides-compute``: computing got faster, exposed communication grew, and the
step did not gain what computing gained. When it comes with an MC2 split (a fused
compute+communication op run as MatMul + collective), the finding says which fused op
split and how to turn fusion back on. Every figure about Computing comes from one
arithmetic, ``ComputeSplit`` (compute_split.py). ``analyse`` returns every finding,
device memory's included, and the headline.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..compare import Comparison
from ..schema import Note
from ..vocab import Vocabulary
from . import late_rank, slow_rank
from .attributes import attribute_findings
from .base import FINDING_IDS, SEVERITY_ORDER, Finding
from .comm_hides_compute import comm_hides_compute
from .compute_split import ComputeSplit, mc2_part, split_computing
from .fusion import FusionGroup, claimed_instances, detect_fusion, fusion_finding
from .headline import Verdict, headline, unmeasured_headline, verdict
from .host_bound import host_bound
from .late_rank import late_in_both, late_ranks, unprofiled_peers
from .memory_growth import memory_growth, memory_sentence
from .operators import operator_findings
from .slow_rank import imbalances_in_both, slow_ranks
from .story import comparability_sentence, compute_parts, framework_sentence

__all__ = ["FINDING_IDS", "SEVERITY_ORDER", "Analysis", "ComputeSplit", "Finding",
           "FusionGroup", "analyse"]


@dataclass(frozen=True)
class Analysis:
    """Fusion groups, findings, the headline, and the operator keys fusion groups claim.

    ``fusion_keys`` maps the keys a group claims entirely (every instance on both sides)
    to its fused type; ``compute`` is the split of Δ Computing; ``operators`` is the
    comparison's operator table with the MC2 columns (``fusion``, ``base_claimed``,
    ``new_claimed``, ``mc2_us``), largest |Δ| first; ``memory_headline`` the sentence on
    device memory (None when no peak moved enough), which ends ``headline``;
    ``compute_sentence`` says where Δ Computing went (``story.compute_parts``);
    ``framework_sentence`` how much of Δ Stage framework operators explain;
    ``comparability_sentence`` what differs besides the stack (it follows the verdict in
    ``headline``); ``verdict`` is the same verdict as a line, ranked causes and caveats.
    """

    fusion: tuple[FusionGroup, ...]
    findings: tuple[Finding, ...]
    fusion_keys: dict[int, str]
    compute: ComputeSplit
    operators: pd.DataFrame
    headline: str
    memory_headline: str | None = None
    compute_sentence: str = ""  # where Δ Computing went, in signed parts
    framework_sentence: str = ""  # how much of Δ Stage the framework operators explain
    comparability_sentence: str = ""  # what differs besides the stack, or ""
    # Imbalances present in both runs (Per rank) and groups holding ranks no one profiled
    # (Who waits for whom): said where they belong, never raised as findings.
    rank_notes: tuple[Note, ...] = ()
    skew_notes: tuple[Note, ...] = ()
    verdict: Verdict | None = None

    @property
    def fusion_claims(self) -> tuple[dict[int, float], dict[int, float]]:
        """Instances per step claimed by fusion groups, per key: (base side, new side)."""
        return claimed_instances(list(self.fusion))


def _operators(cmp: Comparison, groups: list[FusionGroup],
               fusion_keys: dict[int, str]) -> pd.DataFrame:
    """The operator table with the MC2 columns, largest |Δ| first."""
    ops = cmp.operators.copy()
    fusion = ops["key_id"].map(fusion_keys)
    ops["fusion"] = fusion.astype(object).where(fusion.notna(), None)
    base_claims, new_claims = claimed_instances(groups)
    ops["base_claimed"] = ops["key_id"].map(base_claims)
    ops["new_claimed"] = ops["key_id"].map(new_claims)
    ops["mc2_us"] = mc2_part(ops, groups)
    return ops.reindex(ops["delta_us"].abs().sort_values(ascending=False, kind="stable").index)


# Findings about kernel timing: a run whose durations are no measurement gets none.
TIMING = ("comm-hides-compute", "op-regression", "op-improvement", "slow-rank", "late-rank",
          "host-bound")
IMPLAUSIBLE = "implausible-durations"


def _unmeasured(cmp: Comparison) -> list[str]:
    """Labels of the runs whose kernel durations are not measurements (their note)."""
    return [run.label for run in (cmp.base, cmp.new)
            if any(note.code == IMPLAUSIBLE for note in run.warnings)]


def analyse(cmp: Comparison, vocab: Vocabulary | None = None) -> Analysis:
    """Findings for a Comparison, most severe first (``vocab``: its fusion table)."""
    groups, claimed = detect_fusion(cmp, vocab)
    compute = split_computing(cmp, groups)
    findings = [fusion_finding(g) for g in groups]
    hidden = comm_hides_compute(cmp, groups, compute)
    if hidden:
        findings.insert(0, hidden)
    findings += operator_findings(cmp, claimed, groups)
    findings += attribute_findings(cmp)
    slow, late = slow_rank.judge(cmp), late_rank.judge(cmp)  # each judged once
    findings += slow_ranks(cmp, slow) + late_ranks(cmp, late) + host_bound(cmp)
    unmeasured = _unmeasured(cmp)
    if unmeasured:
        findings = [f for f in findings if f.id not in TIMING]
    grown = memory_growth(cmp.memory, cmp.thresholds)
    findings += [grown] if grown else []
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f.severity, len(SEVERITY_ORDER)))
    memory = memory_sentence(cmp.memory, cmp.thresholds)
    alike = comparability_sentence(cmp)
    said = unmeasured_headline(cmp, unmeasured) if unmeasured else \
        headline(cmp, findings, groups, compute)
    text = " ".join(t for t in (said, alike, memory) if t)
    sentence, _ = compute_parts(cmp, compute)
    return Analysis(tuple(groups), tuple(findings), claimed, compute,
                    _operators(cmp, groups, claimed), text, memory,
                    sentence[0].upper() + sentence[1:] + ".", framework_sentence(cmp), alike,
                    imbalances_in_both(cmp, slow) + late_in_both(cmp, late),
                    unprofiled_peers(cmp),
                    verdict(cmp, findings, groups, compute, unmeasured, alike, memory))
