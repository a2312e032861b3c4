"""comm-hides-compute judges a kernel gain against the kernels, not against the step.

A real Level1 rank (MI-2025 rank 0, one step of ~136 ms, ~100 ms of it AllReduce) re-timed:
every compute kernel 10 % faster, every AllReduce 40 % longer, each row moved by what the
rows before it gained or lost, so the device stays serial. Computing falls by ~0.9 ms, under
1 % of the step: a rule that weighs the gain against the step misses it; the gain is 10 %
of the kernels it is a gain of.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA

from cann_diff.pipeline import Options, diff

RANK0 = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
KERNELS = "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
COMPUTE, ALLREDUCE = 0.9, 1.4


def _retimed(source: Path, root: Path, compute: float, allreduce: float) -> Path:
    """A copy of the rank with kernel_details.csv re-timed (no step_trace_time.csv)."""
    target = root / source.name
    (target / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(source / "profiler_info_0.json", target)
    table = pd.read_csv(source / KERNELS, dtype=str, keep_default_na=False)
    start = table["Start Time(us)"].str.strip().astype(float).to_numpy()
    duration = table["Duration(us)"].astype(float).to_numpy()
    is_comm = table["Type"].str.startswith("hcom_allReduce").to_numpy()
    factor = np.where(is_comm, allreduce, compute)
    grown = duration * factor - duration
    end = start + duration
    # each row moves by what every row that ended before it started gained or lost
    order = np.argsort(end, kind="stable")
    before = np.searchsorted(end[order], start, side="right")
    shift = np.concatenate(([0.0], np.cumsum(grown[order])))[before]
    table["Start Time(us)"] = [f"{v:.3f}\t" for v in start + shift]
    table["Duration(us)"] = [f"{v:.3f}" for v in duration * factor]
    table.to_csv(target / KERNELS, index=False)
    return target


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("hidden")
    base = _retimed(RANK0, root / "base", 1.0, 1.0)
    new = _retimed(RANK0, root / "new", COMPUTE, ALLREDUCE)
    table = pd.read_csv(RANK0 / KERNELS, dtype=str, keep_default_na=False)
    return base, new, table


def test_a_ten_percent_kernel_gain_in_a_communication_bound_step_is_raised(pair):
    base, new, table = pair
    result = diff(base, new, Options(base_label="base", new_label="new"))
    report = result.report
    step_ms = report.step.base_us / 1000
    computing = report.step.breakdown.computing
    assert computing.delta_us / 1000 / step_ms > -0.01  # under 1 % of the step
    assert report.step.delta_pct > 25  # the AllReduces grew the step
    hidden = [f for f in report.findings if f.id == "comm-hides-compute"]
    assert len(hidden) == 1, [f.title for f in report.findings]
    finding = hidden[0]
    # every compute kernel is like for like (same shapes, same count): the duration-weighted
    # gain is 10 % of their time, by construction
    compute = ~table["Type"].str.startswith("hcom_allReduce")
    base_time = table.loc[compute, "Duration(us)"].astype(float).sum()
    assert finding.data["matched_kernels_base_us"] == pytest.approx(base_time, rel=1e-6)
    assert finding.data["kernel_gain_pct"] == pytest.approx(10.0, abs=0.01)
    assert finding.data["one_step"] is True
    assert "One step per side" in finding.detail
    assert finding.severity == "high"


def test_a_gain_under_the_threshold_is_not_raised(tmp_path):
    base = _retimed(RANK0, tmp_path / "base", 1.0, 1.0)
    new = _retimed(RANK0, tmp_path / "new", 0.97, ALLREDUCE)  # 3 % < the 5 % threshold
    report = diff(base, new, Options(base_label="base", new_label="new")).report
    assert not [f for f in report.findings if f.id == "comm-hides-compute"]
