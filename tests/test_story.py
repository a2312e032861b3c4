"""The sentences say what the numbers say: signs, statuses, every large part of the change.

Crafted pairs whose answers are worked out by hand from the schedule (tests/profiles.py
accounts every breakdown figure from the schedule it lays out), plus the real 2024/2025
pair of one job on two stacks (skipped without the data).
"""

from __future__ import annotations

import re

import pytest
from conftest import REALDATA, needs_realdata
from profiles import Comm, Kernel, aclnn, scaled, write_profile
from test_statistics import STEP

from cann_diff.findings.story import MARKS
from cann_diff.pipeline import diff

OLD = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch"
NEW = REALDATA / "Ascend__msinsight/test/data/pytorch"


def _kernels_only(op) -> bool:
    return isinstance(op, Kernel)


def _comm_only(op) -> bool:
    return isinstance(op, Comm)


def _parts_hold_in_text(finding) -> None:
    """Every part a finding quotes appears in its text with its own sign and status; the
    compute split's like-for-like row is said with the word of its sign."""
    text = f"{finding.title} {finding.detail}"
    split = finding.data.get("compute_split")
    if split:
        like = next(r["delta_us"] for r in split["rows"] if r["part"] == "like_for_like_us")
        word = "slower" if like > 0 else "faster"
        assert f"like-for-like kernels got {abs(like) / 1000:.2f} ms {word}" in text, text
    for part in finding.data.get("parts", []):
        quoted = f"{part['name']} {part['delta_us'] / 1000:+,.2f} ms"
        assert quoted in text, (quoted, text)
        if part["status"]:
            assert f"{quoted}, {MARKS[part['status']]}" in text, (part, text)


@pytest.fixture(scope="module")
def one_step_pair(tmp_path_factory):
    """One step per side: every kernel ×0.9, every collective ×1.4 (all exposed but the
    data-parallel one): computing falls, exposed communication grows more, the step
    slows. Nothing can be tested, so findings fire on magnitudes."""
    root = tmp_path_factory.mktemp("one_step")
    base = write_profile(root, "base", STEP, steps=(1,))
    new = write_profile(root, "new", scaled(scaled(STEP, 0.9, only=_kernels_only), 1.4,
                                            only=_comm_only), steps=(1,))
    return base, new, diff(base.path, new.path)


def test_one_step_compute_gain_hidden_by_communication_is_named(one_step_pair):
    base, new, result = one_step_pair
    d_comp = new.mean("Computing") - base.mean("Computing")
    d_exposed = (new.mean("Communication(Not Overlapped)")
                 - base.mean("Communication(Not Overlapped)"))
    # The case, by construction: communication eats more than half the compute gain.
    assert d_comp < 0 < d_exposed and d_exposed >= 0.5 * -d_comp
    found = {f.id: f for f in result.analysis.findings}
    hidden = found["comm-hides-compute"]
    assert hidden.data["one_step"] is True and "One step per side: not tested" in hidden.detail
    # Like-for-like kernels: every kernel is 10 % faster, so the gain is 10 % of them.
    kernel_us = sum(op.us for op in STEP if isinstance(op, Kernel))
    assert hidden.data["delta_matched_kernels_us"] == pytest.approx(-0.1 * kernel_us)
    assert f"hides a {0.1 * kernel_us / 1000:.2f} ms kernel gain" in hidden.title
    _parts_hold_in_text(hidden)
    headline = result.report.headline
    assert "one capture per side: the size of the change is not established" in headline
    assert f"like-for-like kernels got {0.1 * kernel_us / 1000:.2f} ms faster" in headline


def test_a_computing_fall_without_faster_kernels_is_no_hidden_gain(tmp_path):
    """Computing falls because work is gone, the kernels themselves got slower: no
    comm-hides-compute, and the compute sentence says both with their signs."""
    layer_base = [*STEP, *[aclnn("Cast", 400.0, "4096,4096", "AI_VECTOR_CORE")] * 4]
    slower = scaled(STEP, 1.02, only=_kernels_only)
    base = write_profile(tmp_path, "base", layer_base, steps=(1, 2, 3), noise=0.002, seed=1)
    new = write_profile(tmp_path, "new", scaled(slower, 1.5, only=_comm_only),
                        steps=(1, 2, 3), noise=0.002, seed=2)
    result = diff(base.path, new.path)
    assert "comm-hides-compute" not in {f.id for f in result.analysis.findings}
    split = result.analysis.compute
    assert split.removed_us == pytest.approx(-1600.0, rel=0.01)  # 4 Casts of 400 µs
    assert split.like_for_like_us > 0  # every kernel 2 % slower
    sentence = result.report.compute.sentence
    assert sentence.startswith("Computing fell by")
    assert "1.60 ms of kernels no longer run (Cast -1.60 ms)" in sentence
    assert f"like-for-like kernels got {split.like_for_like_us / 1000:.2f} ms slower" in \
        sentence


def test_attention_fifty_percent_slower_is_named_in_the_headline(tmp_path):
    """Computing drives the change: the headline names it and the family that moved."""
    def slower_attention(op):
        return isinstance(op, Kernel) and op.type == "FlashAttentionScore"

    base = write_profile(tmp_path, "base", STEP, steps=(1, 2, 3, 4, 5), noise=0.01, seed=1)
    new = write_profile(tmp_path, "new", scaled(STEP, 1.5, only=slower_attention),
                        steps=(1, 2, 3, 4, 5), noise=0.01, seed=2)
    result = diff(base.path, new.path)
    attention = 4 * 880.0 * 0.5  # four layers, +50 % each
    headline = result.report.headline
    assert result.report.step.status == "regressed"
    assert re.search(r"computing \+1\.\d\d ms \(like-for-like kernels 1\.\d\d ms slower: "
                     r"FlashAttentionScore \+1\.\d\d ms, regressed", headline), headline
    part = next(p for p in result.analysis.findings if p.id == "op-regression")
    assert "FlashAttentionScore" in part.detail
    assert result.analysis.compute.like_for_like_us == pytest.approx(attention, rel=0.05)


def test_collectives_of_equal_counts_are_paired_in_launch_order(tmp_path):
    """Each step's four AllReduces differ in size; only the first slows, by 40 %. Pooled
    they are a mix; paired k-th to k-th every pair moves the same way: significant."""
    def step(first_us):
        return [aclnn("MatMulV3", 500.0, "64,64;64,64"), Comm("allReduce", first_us),
                aclnn("Add", 50.0, "64,64;64,64"), Comm("allReduce", 20.0),
                Comm("allReduce", 60.0), Comm("allReduce", 300.0)]

    steps = tuple(range(1, 9))
    base = write_profile(tmp_path, "base", step(1000.0), steps=steps, noise=0.01, seed=1)
    new = write_profile(tmp_path, "new", step(1400.0), steps=steps, noise=0.01, seed=2)
    ops = diff(base.path, new.path).comparison.operators
    all_reduce = ops[ops["op_type"] == "AllReduce"].iloc[0]
    # Paired totals: (1400 + 20 + 60 + 300) / (1000 + 20 + 60 + 300) − 1 = +29.0 %.
    assert all_reduce["instance_change_pct"] == pytest.approx(400 / 1380 * 100, rel=0.05)
    assert all_reduce["status"] == "regressed" and all_reduce["tested"]


def test_untested_keys_have_no_p_value_and_are_not_unchanged(tmp_path):
    """One instance per side, +30 %: no test can reach α, so no p and no "unchanged"."""
    def build(cast_us):
        return lambda rank, step: [*STEP, *([aclnn("Cast", cast_us, "4096,4096",
                                                   "AI_VECTOR_CORE")] if step == 1 else [])]

    base = write_profile(tmp_path, "base", build(20.0), steps=(1, 2, 3))
    new = write_profile(tmp_path, "new", build(26.0), steps=(1, 2, 3))
    cast = next(op for op in diff(base.path, new.path).report.operators
                if op.op_type == "Cast")
    assert (cast.status, cast.p_value, cast.tested) == ("untested", None, False)


@needs_realdata
@pytest.mark.slow
@pytest.mark.parametrize("sub", ["text/level1/rank0_ascend_pt", "text/level1"])
def test_real_pair_says_what_its_numbers_say(sub):
    """The 2024 (Ascend910A) and 2025 (Ascend910B) captures of one job."""
    result = diff(OLD / sub, NEW / sub)
    report = result.report
    # Like-for-like kernels got slower (+0.83 ms on rank 0): no hidden "gain". (0.95 ms
    # before MemSet, which has no shapes and runs 15 → 11 times per step, was compared by
    # its totals: its +0.12 ms per-instance effect was counted as like for like.)
    assert result.analysis.compute.like_for_like_us > 0
    assert "comm-hides-compute" not in {f.id for f in report.findings}
    like = result.analysis.compute.like_for_like_us / 1000
    assert f"like-for-like kernels got {like:.2f} ms slower" in report.compute.sentence
    # Free grew by a fifth or more of the step change: the headline names it.
    free = report.step.breakdown.free.delta_us
    assert free >= 0.2 * report.step.delta_us
    assert f"Free (device idle) {free / 1000:+.2f} ms" in report.headline
    assert "one capture per side" in report.headline
    all_reduce = next(op for op in report.operators if op.op_type == "AllReduce")
    assert all_reduce.status != "unchanged"
    assert not [op for op in report.operators if op.base_instances == op.new_instances == 1
                and op.p_value == 1.0]
    if sub.endswith("rank0_ascend_pt"):
        assert f"{like:.2f}" == "0.83"


@needs_realdata
@pytest.mark.slow
def test_real_pair_group_bandwidth_is_the_profilers_unit():
    """communication.json's Bandwidth(GB/s) is MB per ms (rank 0's first AllReduce: 28.647
    MB over HCCS in 1.8168 ms, written 15.7676): the group's is Σ MB / Σ ms the same way."""
    import json

    rank0 = NEW / "text/level1/rank0_ascend_pt"
    data = json.loads((rank0 / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
    ops = [op["Communication Bandwidth Info"]["HCCS"] for step in data.values()
           for op in step["collective"].values()]
    first = ops[0]
    assert first["Transit Size(MB)"] / first["Transit Time(ms)"] == pytest.approx(
        first["Bandwidth(GB/s)"], rel=1e-4)
    want = sum(o["Transit Size(MB)"] for o in ops) / sum(o["Transit Time(ms)"] for o in ops)
    [group] = diff(rank0, rank0).report.comm_groups
    assert group.base_hccs_gbps == pytest.approx(want, rel=1e-6)


def test_parts_of_every_finding_hold_in_its_text(one_step_pair):
    _, _, result = one_step_pair
    for finding in result.analysis.findings:
        _parts_hold_in_text(finding)
