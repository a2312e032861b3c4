"""Report stage: one typed, frozen model of the result that every renderer reads.

``model.py`` holds the types (the report, its memory section, the several-candidates
summary), ``build.py`` builds them from the comparison and the analysis, and
``json_form.py`` derives report.json from them.
"""

from __future__ import annotations

from .build import build_candidates_summary, build_report, fusion_state, rows_of, verdict
from .json_form import SCHEMA, clean, frozen, json_schema, pickled, to_json
from .model import (
    AllSteps,
    BandwidthChange,
    Breakdown,
    Candidate,
    CandidatesSummary,
    CategoryRow,
    CollectiveLinkRow,
    CommParts,
    CommTypeRow,
    ComponentPeak,
    ComputeRow,
    ComputeSplitResult,
    CopyChange,
    FamilyRow,
    Figure,
    FindingRow,
    FrameworkModuleRow,
    FrameworkOpRow,
    FreeResult,
    FusionRow,
    GroupRow,
    HostFigures,
    Invocation,
    KernelShare,
    Memory,
    MemorySeries,
    ModuleMemoryChange,
    Mover,
    OperatorMemoryChange,
    OperatorRow,
    PeakChange,
    RankRow,
    Report,
    ReportSettings,
    ScreenedStep,
    Side,
    SkewRow,
    StepLanes,
    StepResult,
    Tool,
    Versions,
    tool_version,
)

__all__ = ["SCHEMA", "AllSteps", "BandwidthChange", "Breakdown", "Candidate", "CandidatesSummary",
           "CategoryRow", "CollectiveLinkRow", "CommParts", "CommTypeRow", "ComponentPeak",
           "ComputeRow", "ComputeSplitResult", "CopyChange", "FamilyRow", "Figure", "FindingRow",
           "FrameworkModuleRow", "FrameworkOpRow", "FreeResult", "FusionRow", "GroupRow",
           "HostFigures", "Invocation", "KernelShare", "Memory", "MemorySeries",
           "ModuleMemoryChange", "Mover", "OperatorMemoryChange", "OperatorRow", "PeakChange",
           "RankRow", "Report", "ReportSettings", "ScreenedStep", "Side", "SkewRow", "StepLanes",
           "StepResult", "Tool", "Versions", "build_candidates_summary", "build_report", "clean",
           "frozen", "fusion_state", "json_schema", "pickled", "rows_of", "to_json", "tool_version",
           "verdict"]
