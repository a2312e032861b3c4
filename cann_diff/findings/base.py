"""What every finding module returns: a Finding; the registry of finding ids."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import format as fmt

# Every finding id the report can carry, with when it is raised (docs/design.md "Finding ids").
FINDING_IDS = {
    "comm-hides-compute": "computing fell, exposed communication rose, the step gained less",
    "mc2-split": "a fused MC2 op in base runs as its split equivalent in new",
    "mc2-fused": "split ops in base run as a fused MC2 op in new",
    "op-regression": "same-shape operators significantly slower per instance, by ≥ threshold",
    "op-improvement": "same-shape operators significantly faster per instance, by ≥ threshold",
    "count-changed": "operator keys whose instances per step changed (other work, not speed)",
    "new-ops": "operator keys only in new",
    "removed-ops": "operator keys only in base",
    "slow-rank": "one rank's step, computing or exposed communication is an outlier",
    "memory-growth": "peak reserved device memory grew beyond the threshold",
    "late-rank": "one rank starts a collective last in most instances; the others wait",
    "host-bound": "Free grew and most of the growth is the device waiting for launches",
    "aicpu-fallback": "operator keys whose kernels now run on AI_CPU, or new keys run there",
    "kernel-changed": "operator keys served by another kernel implementation",
    "placement-changed": "operator keys on other cores: block dim, mix block dim, core type",
    "format-changed": "operator keys taking other input formats, with their conversions",
    "dynamic-shape": "operator keys whose op state went static to dynamic",
}
SEVERITY_ORDER = {"high": 0, "medium": 1, "info": 2}


@dataclass(frozen=True)
class Finding:
    """One verdict with its numbers; ``data`` carries the figures behind ``detail``."""

    id: str
    severity: str
    title: str
    detail: str
    delta_us: float
    data: dict = field(default_factory=dict)


    def __post_init__(self):
        if self.id not in FINDING_IDS:
            raise ValueError(f"unregistered finding id {self.id!r}")


def ms(us: float) -> str:
    """µs as ``'1.23 ms'`` for finding texts."""
    return f"{fmt.ms(us)} ms"
