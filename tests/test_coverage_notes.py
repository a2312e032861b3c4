"""Comparable at all: a side that is an excerpt, and two runs that are not one workload.

Two real kernel tables of msprof-analyze's unit tests (tests/data, provenance there): a
2023-11 capture of one step (591 rows, 77 % busy) and a 2025-01 excerpt of 29 rows, 10 ms of
kernels over a 2.86 s span. The tool once called the second "452.8 % slower" without a
word; the report now puts a ⚠ above the verdict for each, with figures computed here from
the files with pandas.
"""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
from conftest import DATA
from profiles import aclnn, write_profile

from cann_diff.pipeline import Options, diff
from cann_diff.render.markdown import render_markdown

ADVICE = DATA / "realdata/Ascend__msprof-analyze/test/ut/advisor"
OLD = ADVICE / "advisor_backend/compute_advice/kernel_details.csv"
EXCERPT = ADVICE / "compute_advice/data/kernel_details.csv"


def _profile(csv, root):
    out = root / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(csv, out / "kernel_details.csv")
    return root


def _busy(csv) -> float:
    table = pd.read_csv(csv)
    start = table["Start Time(us)"].astype(str).str.strip().astype(float)
    duration = table["Duration(us)"].astype(float)
    return duration.sum() / ((start + duration).max() - start.min())


def _shared_share(csv, other) -> float:
    """Share of a table's compute time in (family, input shapes) the other runs too —
    family the type less its V<n> — what keys paired by more than their family share."""
    def keyed(table):
        compute = table[~table["Type"].astype(str).str.startswith("hcom")]
        family = compute["Type"].astype(str).str.replace(r"V\d+$", "", regex=True)
        shapes = compute["Input Shapes"].astype(str).str.replace('"', "")
        return compute.assign(key=family + "|" + shapes)
    mine, theirs = keyed(pd.read_csv(csv)), keyed(pd.read_csv(other))
    common = mine["key"].isin(set(theirs["key"]))
    return mine.loc[common, "Duration(us)"].sum() / mine["Duration(us)"].sum()


@pytest.fixture(scope="module")
def advice(tmp_path_factory):
    root = tmp_path_factory.mktemp("advice")
    report = diff(_profile(OLD, root / "old"), _profile(EXCERPT, root / "excerpt"),
                  Options(base_label="2023-11", new_label="2025-01")).report
    return report, render_markdown(report)


def test_an_excerpt_is_called_one_above_the_verdict(advice):
    report, markdown = advice
    notes = {n.code: n for n in report.notes}
    busy = _busy(EXCERPT)
    assert busy == pytest.approx(0.0035, abs=1e-4)  # 10.06 ms of 2,857 ms
    excerpt = notes["excerpt"]
    assert excerpt.data["side"] == "new"
    assert excerpt.data["busy_share"] == pytest.approx(busy, rel=1e-3)
    assert "new (2025-01) is 0.35% busy" in excerpt.text
    assert _busy(OLD) > 0.05  # the 2023 capture is a whole step: no note for it
    assert [n.data["side"] for n in report.notes if n.code == "excerpt"] == ["new"]
    above = markdown.split("**Verdict:**")[0]
    assert "is 0.35% busy" in above and "not the same workload" in above


def test_two_workloads_are_called_unrelated(advice):
    report, _ = advice
    note = next(n for n in report.notes if n.code == "unrelated")
    shared = _shared_share(OLD, EXCERPT), _shared_share(EXCERPT, OLD)
    assert max(shared) < 0.01  # one Add shape in common
    assert note.data["base_share"] == pytest.approx(shared[0], abs=1e-3)
    assert note.data["new_share"] == pytest.approx(shared[1], abs=1e-3)
    shown = re.search(r"hold only (\d+)% of base and (\d+)% of new", note.text)
    assert shown and (int(shown.group(1)), int(shown.group(2))) == (
        round(note.data["base_share"] * 100), round(note.data["new_share"] * 100))


def _family_overlap(csv, other) -> float:
    """Σ over families (type less its V<n>) of the smaller of the two shares of compute time."""
    def mix(path):
        table = pd.read_csv(path)
        compute = table[~table["Type"].astype(str).str.startswith("hcom")]
        family = compute["Type"].astype(str).str.replace(r"V\d+$", "", regex=True)
        return compute.groupby(family)["Duration(us)"].sum() / compute["Duration(us)"].sum()
    return float(pd.concat([mix(csv), mix(other)], axis=1).fillna(0.0).min(axis=1).sum())


def test_the_unrelated_pair_shares_no_mix_either(advice):
    report, _ = advice
    note = next(n for n in report.notes if n.code == "unrelated")
    overlap = _family_overlap(OLD, EXCERPT)
    assert overlap < 0.5
    assert note.data["family_overlap"] == pytest.approx(overlap, abs=0.01)


def test_a_bigger_batch_is_other_shapes_not_another_workload(tmp_path):
    """Every shape doubles (no key in common) but the mix of families stays: the runs
    differ in shapes (its own note), not in workload."""
    small = [aclnn("MatMulV3", 400.0, "4096,4096;4096,4096"), aclnn("Add", 20.0, "4096,4096")]
    big = [aclnn("MatMulV3", 800.0, "8192,4096;4096,4096"), aclnn("Add", 40.0, "8192,4096")]
    report = diff(write_profile(tmp_path, "base", small * 4).path,
                  write_profile(tmp_path, "new", big * 4).path).report
    codes = {n.code for n in report.notes}
    assert "shapes-differ" in codes and "unrelated" not in codes


def test_a_like_for_like_pair_gets_neither(tmp_path):
    layer = [aclnn("MatMulV3", 400.0, "4096,4096;4096,4096"), aclnn("Add", 20.0, "4096,4096")]
    base = write_profile(tmp_path, "base", layer * 4)
    new = write_profile(tmp_path, "new", layer * 4, noise=0.02, seed=3)
    report = diff(base.path, new.path).report
    assert not {"excerpt", "unrelated"} & {n.code for n in report.notes}
