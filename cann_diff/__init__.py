"""cann-diff: what a CANN upgrade does to an Ascend NPU workload's performance, and why.

Library use::

    from cann_diff import diff
    result = diff("baseline/", "candidate/")
    print(result.report.headline)
"""

from .compare import Comparison, compare
from .findings import Analysis, analyse
from .match import Matched, match
from .pipeline import Options, Result, diff
from .read import load_run
from .report import Report, build_report
from .schema import Run

__all__ = ["Analysis", "Comparison", "Matched", "Options", "Report", "Result", "Run", "analyse",
           "build_report", "compare", "diff", "load_run", "match"]
