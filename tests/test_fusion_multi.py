"""Several MC2 fused types split at once: each split kernel goes to the fused type it replaced.

A TP 8 sequence-parallel layer (S = 4096 tokens, H = 4096, TP = 8), L = 8 layers per step,
3 steps, 1 rank, no noise (tests/profiles.py), so every figure below is exact.

FUSED layer (base, CANN with MC2 on):
  RmsNorm 60 | AllGatherMatmul 900 (x 512,4096 · w 4096,1536) | FlashAttentionScore 400 |
  MatmulAllReduce 700 (x 4096,512 · w 512,4096 · bias 4096) | RmsNorm 60 |
  MatMulV3 1200 (gate-up, 4096,4096 · 4096,2752) |
  MatmulReduceScatter 1100 (x 4096,1376 · w 1376,4096) |
  MatMulV3 500 (recompute, 4096,4096 · 4096,8192) in layers 0-3 only (4 per step)
SPLIT layer (new):
  RmsNorm 60 | AllGather 350 → MatMulV3 800 (4096,4096 · 4096,1536) | FlashAttentionScore 400 |
  MatMulV3 600 (4096,512 · 512,4096) → AllReduce 300 | RmsNorm 60 | MatMulV3 1200 (gate-up) |
  MatMulV3 950 (4096,1376 · 1376,4096) → ReduceScatter 400 |
  MatMulV3 500 (recompute) in every layer (8 per step: an ordinary key that gains 4)

AllGatherMatmul gathers its x (512 local rows) over TP 8: the split MatMul runs on the
gathered 8 · 512 = 4096 rows. MatmulAllReduce and MatmulReduceScatter split into a MatMul on
the fused op's own x · w. Collectives are exposed (the compute stream waits for them).

Per step, by hand (L = 8):
  AllGatherMatmul      base 8 · 900  = 7200   new 8 · (350 + 800) =  9200
  MatmulAllReduce      base 8 · 700  = 5600   new 8 · (600 + 300) =  7200
  MatmulReduceScatter  base 8 · 1100 = 8800   new 8 · (950 + 400) = 10800
The gate-up MatMul (8 → 8 per step) and the recompute MatMul (4 → 8 per step) are ordinary:
no group claims them.
"""

from __future__ import annotations

import pytest
from profiles import Comm, Kernel, aclnn, write_profile

from cann_diff.pipeline import diff

L = 8
TP = 8
NORM = "512,4096;4096"
ATTN = "1,32,4096,128;1,32,4096,128"
AG_FUSED = "512,4096;4096,1536"  # x local rows S/TP; w column-parallel H·3/TP
AG_MATMUL = f"{512 * TP},4096;4096,1536"  # x gathered over TP: 4096 rows
AR_FUSED = "4096,512;512,4096;4096"  # x; w row-parallel H/TP; bias
AR_MATMUL = "4096,512;512,4096"
RS_FUSED = "4096,1376;1376,4096"  # x; w row-parallel FFN/TP (11008/8)
RS_MATMUL = RS_FUSED
GATE_UP = "4096,4096;4096,2752"
RECOMPUTE = "4096,4096;4096,8192"

TRUTH = {  # (base, new) µs per step, from the docstring
    "AllGatherMatmul": (L * 900.0, L * (350.0 + 800.0)),
    "MatmulAllReduce": (L * 700.0, L * (600.0 + 300.0)),
    "MatmulReduceScatter": (L * 1100.0, L * (950.0 + 400.0)),
}
SPLIT_COUNTS = {"AllGatherMatmul": {"AllGather": L, "MatMul": L},
                "MatmulAllReduce": {"AllReduce": L, "MatMul": L},
                "MatmulReduceScatter": {"ReduceScatter": L, "MatMul": L}}


def mc2(op_type: str, us: float, shapes: str) -> Kernel:
    return aclnn(op_type, us, shapes, "MIX_AIC")


def fused_ag(shapes: str = AG_FUSED):
    return [mc2("AllGatherMatmul", 900.0, shapes)]


def split_ag(matmul_shapes: str = AG_MATMUL):
    return [Comm("allGather", 350.0), aclnn("MatMulV3", 800.0, matmul_shapes)]


def fused_ar():
    return [mc2("MatmulAllReduce", 700.0, AR_FUSED)]


def split_ar():
    return [aclnn("MatMulV3", 600.0, AR_MATMUL), Comm("allReduce", 300.0)]


def fused_rs():
    return [mc2("MatmulReduceScatter", 1100.0, RS_FUSED)]


def split_rs(matmul_shapes: str = RS_MATMUL):
    return [aclnn("MatMulV3", 950.0, matmul_shapes), Comm("reduceScatter", 400.0)]


def layer(index: int, ag, ar, rs, recompute_every_layer: bool):
    norm = aclnn("RmsNorm", 60.0, NORM, "AI_VECTOR_CORE")
    ops = [norm, *ag, aclnn("FlashAttentionScore", 400.0, ATTN, "MIX_AIC"), *ar, norm,
           aclnn("MatMulV3", 1200.0, GATE_UP), *rs]
    if recompute_every_layer or index < L // 2:
        ops.append(aclnn("MatMulV3", 500.0, RECOMPUTE))
    return ops


def schedule(ag, ar, rs, recompute_every_layer: bool):
    return [op for i in range(L) for op in layer(i, ag, ar, rs, recompute_every_layer)]


def base_schedule(ag_shapes: str = AG_FUSED):
    return schedule(fused_ag(ag_shapes), fused_ar(), fused_rs(), recompute_every_layer=False)


def tp8_pair(tmp_path, new_schedule, base=None):
    base_run = write_profile(tmp_path, "base", base or base_schedule())
    new_run = write_profile(tmp_path, "new", new_schedule)
    return diff(base_run.path, new_run.path)


def groups_of(result) -> dict:
    return {g.fused_type: g for g in result.analysis.fusion}


def key_ids(result, shapes: str, op_type: str = "MatMulV3") -> list[int]:
    ops = result.analysis.operators
    rows = ops[(ops["op_type"] == op_type) & (ops["input_shapes"] == shapes)]
    return [int(k) for k in rows["key_id"]]


def claimed_keys(result) -> set[int]:
    base, new = result.analysis.fusion_claims
    return set(base) | set(new)


@pytest.fixture(scope="module")
def all_split(tmp_path_factory):
    new = schedule(split_ag(), split_ar(), split_rs(), recompute_every_layer=True)
    return tp8_pair(tmp_path_factory.mktemp("tp8"), new)


def test_every_group_gets_its_own_split_time(all_split):
    groups = groups_of(all_split)
    assert set(groups) == set(TRUTH)
    for fused_type, (base_us, new_us) in TRUTH.items():
        group = groups[fused_type]
        assert group.direction == "split"
        assert (group.base_count, group.new_count) == (L, 0)
        assert group.base_total_us == pytest.approx(base_us, rel=0.10), fused_type
        assert group.new_total_us == pytest.approx(new_us, rel=0.10), fused_type


def test_split_counts_name_the_matmul_and_the_collective(all_split):
    groups = groups_of(all_split)
    for fused_type, counts in SPLIT_COUNTS.items():
        assert groups[fused_type].split_counts == pytest.approx(counts), fused_type
        assert groups[fused_type].paired_by == "shapes", fused_type


def test_each_group_claims_the_matmul_of_its_own_shapes(all_split):
    groups = groups_of(all_split)
    for fused_type, shapes in (("AllGatherMatmul", AG_MATMUL), ("MatmulAllReduce", AR_MATMUL),
                               ("MatmulReduceScatter", RS_MATMUL)):
        [key] = key_ids(all_split, shapes)
        assert groups[fused_type].new_claims[key] == pytest.approx(L), fused_type
        others = [g for t, g in groups.items() if t != fused_type]
        assert all(key not in g.new_claims for g in others), fused_type


def test_ordinary_matmuls_are_not_claimed(all_split):
    ordinary = key_ids(all_split, GATE_UP) + key_ids(all_split, RECOMPUTE)
    assert len(ordinary) == 2
    assert not claimed_keys(all_split) & set(ordinary)
    ops = all_split.analysis.operators.set_index("key_id")
    assert ops.loc[ordinary, "fusion"].isna().all()
    # The recompute key gained 4 instances per step (4 → 8) and keeps them as its own.
    assert ops.loc[key_ids(all_split, RECOMPUTE)[0], "new_count"] == pytest.approx(L)


def test_mc2_part_of_delta_computing_is_the_fused_vs_split_compute(all_split):
    # MC2 row of Δ Computing: split compute kernels claimed minus the fused kernels lost,
    # 8 · (800 + 600 + 950) − 8 · (900 + 700 + 1100) = 18800 − 21600 = −2800 µs per step.
    assert all_split.analysis.compute.mc2_us == pytest.approx(L * (800 + 600 + 950)
                                                              - L * (900 + 700 + 1100))


def test_one_fused_type_split_behaves_as_before(tmp_path):
    # Only MatmulReduceScatter splits; AllGatherMatmul and MatmulAllReduce stay fused.
    # One group: base 8 · 1100 = 8800, new 8 · (950 + 400) = 10800 µs per step.
    new = schedule(fused_ag(), fused_ar(), split_rs(), recompute_every_layer=True)
    result = tp8_pair(tmp_path, new)
    [group] = result.analysis.fusion
    assert (group.fused_type, group.direction, group.paired_by) == (
        "MatmulReduceScatter", "split", "shapes")
    assert group.split_counts == pytest.approx({"ReduceScatter": L, "MatMul": L})
    assert group.base_total_us == pytest.approx(L * 1100.0)
    assert group.new_total_us == pytest.approx(L * (950.0 + 400.0))
    [key] = key_ids(result, RS_MATMUL)
    assert claimed_keys(result) & set(key_ids(result, RECOMPUTE) + key_ids(result, GATE_UP)) \
        == set()
    assert group.new_claims[key] == pytest.approx(L)


def test_a_fused_type_without_shapes_pairs_by_counts_off_the_others_keys(tmp_path):
    # Base records no input shapes for AllGatherMatmul (nothing to derive from): it pairs
    # by counts, but only among keys no other fused type's shapes claim — the
    # MatmulReduceScatter and MatmulAllReduce MatMuls stay theirs. Of the keys left, the
    # gathered MatMul gained 8 per step, the recompute 4: the 8 wanted come from the first.
    new = schedule(split_ag(), split_ar(), split_rs(), recompute_every_layer=True)
    result = tp8_pair(tmp_path, new, base=base_schedule(ag_shapes=""))
    groups = groups_of(result)
    assert groups["AllGatherMatmul"].paired_by == "counts"
    for fused_type, (base_us, new_us) in TRUTH.items():
        assert groups[fused_type].split_counts == pytest.approx(SPLIT_COUNTS[fused_type])
        assert groups[fused_type].new_total_us == pytest.approx(new_us, rel=0.10), fused_type
    [rs_key] = key_ids(result, RS_MATMUL)
    assert groups["MatmulReduceScatter"].new_claims == pytest.approx(
        {rs_key: L, **{k: L for k in key_ids(result, "", "ReduceScatter")}})


def test_split_matmul_with_the_weight_transposed_pairs_by_shapes(tmp_path):
    # The split stack records the MatMul's weight as [n, k] (x2 transposed): 4096,1376 ·
    # 4096,1376 is the same product as the fused op's 4096,1376 · 1376,4096.
    transposed = "4096,1376;4096,1376"
    new = schedule(split_ag(), split_ar(), split_rs(transposed), recompute_every_layer=True)
    result = tp8_pair(tmp_path, new)
    group = groups_of(result)["MatmulReduceScatter"]
    assert group.paired_by == "shapes"
    [key] = key_ids(result, transposed)
    assert group.new_claims[key] == pytest.approx(L)
    assert group.new_total_us == pytest.approx(L * (950.0 + 400.0))


def test_split_back_to_fused_gives_each_group_its_own_time(tmp_path):
    # The reverse pair: base split, new fused. Each group's base (split) time is its own.
    split = schedule(split_ag(), split_ar(), split_rs(), recompute_every_layer=True)
    result = tp8_pair(tmp_path, base_schedule(), base=split)
    groups = groups_of(result)
    assert set(groups) == set(TRUTH)
    for fused_type, (fused_us, split_us) in TRUTH.items():
        assert groups[fused_type].direction == "fused"
        assert groups[fused_type].base_total_us == pytest.approx(split_us, rel=0.10)
        assert groups[fused_type].new_total_us == pytest.approx(fused_us, rel=0.10)
        assert groups[fused_type].split_counts == pytest.approx(SPLIT_COUNTS[fused_type])
