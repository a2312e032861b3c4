"""Fused vs split communication (MC2) and the comm-hides-compute verdict.

Crafted pairs (tests/profiles.py, no noise, so every figure is exact). Every run is
K = 4 "layers" per step, 3 steps, 1 rank, ops 2 µs apart (GAP). Shapes:
X = "4096,2048;2048,4096" (x1;x2 of a row-parallel linear); the fused op's inputs are
X + ";4096" (x1;x2;bias).

FUSED layer (CANN 7-style):  RmsNorm 100 | MatmulAllReduce 700 | FlashAttentionScore 500
SPLIT layer (CANN 8-style):  RmsNorm  94 | MatMulV3 600 | AllReduce 300 exposed | FA 470
(the other compute kernels are 6 % faster: 100 → 94, 500 → 470).

Per step, by hand:
  FUSED: 12 ops, kernels 4·(100+700+500) = 5200, gaps 11·2 = 22   → Stage 5222,
         Computing 5200, exposed communication 0.
  SPLIT: 16 ops, kernels 4·(94+600+300+470) = 5856, gaps 15·2 = 30 → Stage 5886,
         Computing 4·(94+600+470) = 4656, exposed communication 4·300 = 1200.
  FUSED → SPLIT: Δcomputing = 4656 − 5200 = −544, Δexposed = +1200,
                 Δstep = 5886 − 5222 = +664 (+664/5222 = +12.7 %).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner
from profiles import Comm, Kernel, aclnn, write_profile

from cann_diff.cli import main
from cann_diff.pipeline import Options, diff
from cann_diff.vocab.names import canonical_names

K = 4
X = "4096,2048;2048,4096"
FUSED_SHAPES = X + ";4096"
NORM = "4096,2048;2048"
ATTN = "1,16,4096,128;1,16,4096,128"
FUSED_NAME = "aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce"


def fused_layer(norm=100.0, attn=500.0, fused=700.0, name=FUSED_NAME):
    return [aclnn("RmsNorm", norm, NORM, "AI_VECTOR_CORE"),
            Kernel(name, "MatmulAllReduce", "MIX_AIC", fused, FUSED_SHAPES),
            aclnn("FlashAttentionScore", attn, ATTN, "MIX_AIC")]


def split_layer(norm=94.0, attn=470.0, matmul=600.0, comm=300.0):
    return [aclnn("RmsNorm", norm, NORM, "AI_VECTOR_CORE"), aclnn("MatMulV3", matmul, X),
            Comm("allReduce", comm), aclnn("FlashAttentionScore", attn, ATTN, "MIX_AIC")]


def run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def by_id(report: dict) -> dict[str, dict]:
    return {f["id"]: f for f in report["findings"]}


@pytest.fixture(scope="module")
def fused_split(tmp_path_factory):
    root = tmp_path_factory.mktemp("fusion")
    fused = write_profile(root, "fused", fused_layer() * K)
    split = write_profile(root, "split", split_layer() * K)
    return fused, split


@pytest.fixture(scope="module")
def to_split(fused_split):
    fused, split = fused_split
    return diff(fused.path, split.path).report.to_dict()


# ---------------------------------------------------------------- fused → split


def test_builder_figures_match_the_hand_arithmetic(fused_split):
    fused, split = fused_split
    assert fused.mean("Stage") == pytest.approx(5222.0)
    assert fused.mean("Computing") == pytest.approx(5200.0)
    assert split.mean("Stage") == pytest.approx(5886.0)
    assert split.mean("Computing") == pytest.approx(4656.0)
    assert split.mean("Communication(Not Overlapped)") == pytest.approx(1200.0)


def test_fused_to_split_group(to_split):
    assert len(to_split["fusion"]) == 1
    group = to_split["fusion"][0]
    assert group["fused_type"] == "MatmulAllReduce"
    assert group["direction"] == "split"
    assert group["base_count"] == K and group["new_count"] == 0
    assert group["split_counts"] == {"AllReduce": K, "MatMul": K}
    assert group["paired_by"] == "shapes"
    # base: 4 fused · 700 = 2800; new: 4 MatMulV3 · 600 + 4 AllReduce · 300 = 3600.
    assert group["base_total_us"] == pytest.approx(2800.0)
    assert group["new_total_us"] == pytest.approx(3600.0)
    assert group["exposed_us"] == pytest.approx(1200.0)


def test_fused_to_split_findings(to_split):
    found = by_id(to_split)
    assert {"mc2-split", "comm-hides-compute"} <= set(found)
    assert "mc2-fused" not in found
    hidden = found["comm-hides-compute"]
    assert hidden["severity"] == "high"
    assert hidden["data"]["delta_computing_us"] == pytest.approx(-544.0)
    assert hidden["data"]["delta_exposed_us"] == pytest.approx(1200.0)
    assert hidden["data"]["delta_step_us"] == pytest.approx(664.0)
    assert hidden["data"]["comm_growth"]["AllReduce"]["delta_count"] == pytest.approx(K)
    assert to_split["findings"][0]["severity"] == "high"
    step = to_split["step"]
    assert step["status"] == "regressed"
    assert step["delta_pct"] == pytest.approx(664 / 5222 * 100)


def test_fused_to_split_rows_belong_to_the_group_not_added_removed(to_split):
    rows = {(o["op_type"], o["input_shapes"]): o for o in to_split["operators"]}
    claimed = [rows[("MatmulAllReduce", FUSED_SHAPES)], rows[("MatMulV3", X)],
               rows[("AllReduce", "")]]
    assert [o["fusion"] for o in claimed] == ["MatmulAllReduce"] * 3
    assert [o["status"] for o in claimed] == ["removed", "added", "added"]
    # Everything else is plain compute, 6 % faster, and in no group.
    others = [o for o in to_split["operators"] if o not in claimed]
    assert {o["op_type"] for o in others} == {"RmsNorm", "FlashAttentionScore"}
    assert all(o["fusion"] is None and o["status"] == "improved" for o in others)
    ids = {f["id"] for f in to_split["findings"]}
    assert not ids & {"new-ops", "removed-ops"}


def test_fused_to_split_markdown_headline(fused_split, tmp_path):
    fused, split = fused_split
    result = run_cli(fused.path, split.path, "-o", tmp_path / "out", "-q", "--no-charts")
    assert result.exit_code == 0, result.output
    md = (tmp_path / "out" / "report.md").read_text()
    # The verdict block: its line, then the causes, up to the first section.
    verdict = md[md.index("**Verdict:**"):md.index("\n## ")]
    line = verdict.splitlines()[0]
    # 5.22 → 5.89 ms; 4 more AllReduce per step add 4·300 µs = 1.20 ms exposed.
    assert "12.7% slower" in line and "5.22 → 5.89 ms per step" in line
    cause = next(c for c in verdict.splitlines() if c.startswith("- **exposed communication"))
    assert "MatmulAllReduce no longer fused" in cause
    assert cause.startswith("- **exposed communication +1.20 ms**")
    assert "AllReduce +1.20 ms, 4 more per step" in cause
    assert "## MC2 fusion" in md
    assert "## Only in new (added)" not in md and "## Only in base (removed)" not in md


def test_partial_split(tmp_path):
    # New keeps 2 of the 4 fused ops per step and splits the other 2:
    # group 4 → 2 fused, split_counts 2 + 2; base 4·700 = 2800,
    # new 2·700 + 2·600 (MatMulV3) + 2·300 (AllReduce) = 3200 µs per step.
    base = write_profile(tmp_path, "base", fused_layer() * K)
    new = write_profile(tmp_path, "new", fused_layer() * 2 + split_layer() * 2)
    report = diff(base.path, new.path).report.to_dict()
    [group] = report["fusion"]
    assert (group["direction"], group["base_count"], group["new_count"]) == ("split", K, 2)
    assert group["split_counts"] == {"AllReduce": 2, "MatMul": 2}
    assert group["base_total_us"] == pytest.approx(2800.0)
    assert group["new_total_us"] == pytest.approx(3200.0)


@pytest.mark.slow
def test_two_ranks_with_noise(tmp_path):
    # Same pair on 2 ranks with 2 % lognormal noise: counts are per step and per rank,
    # the verdict survives noise, and the figures stay near the exact ones.
    base = write_profile(tmp_path, "base", fused_layer() * K, ranks=(0, 1), noise=0.02, seed=1)
    new = write_profile(tmp_path, "new", split_layer() * K, ranks=(0, 1), noise=0.02, seed=2)
    report = diff(base.path, new.path).report.to_dict()
    assert report["base"]["ranks"] == [0, 1]
    [group] = report["fusion"]
    assert (group["base_count"], group["new_count"]) == (K, 0)
    assert group["split_counts"] == {"AllReduce": K, "MatMul": K}
    hidden = by_id(report)["comm-hides-compute"]
    assert hidden["severity"] == "high"
    assert hidden["data"]["delta_step_us"] == pytest.approx(664.0, rel=0.05)
    assert hidden["data"]["delta_exposed_us"] == pytest.approx(1200.0, rel=0.05)


# ---------------------------------------------------------------- split → fused


def test_split_to_fused_is_an_improvement(fused_split):
    fused, split = fused_split
    report = diff(split.path, fused.path).report.to_dict()
    assert len(report["fusion"]) == 1
    group = report["fusion"][0]
    assert (group["fused_type"], group["direction"]) == ("MatmulAllReduce", "fused")
    assert group["base_count"] == 0 and group["new_count"] == K
    assert group["split_counts"] == {"AllReduce": K, "MatMul": K}
    # base (split side) 3600 µs per step → new 2800: 800 µs saved.
    assert group["delta_us"] == pytest.approx(-800.0)
    found = by_id(report)
    assert "mc2-fused" in found and "mc2-split" not in found
    assert "comm-hides-compute" not in found  # computing grew by 544 µs: nothing hidden
    assert report["step"]["status"] == "improved"
    assert report["step"]["delta_us"] == pytest.approx(-664.0)


# ---------------------------------------------------------------- the verdict's boundary


def comm_layer(scale: float, comm_us: float):
    """Unfused layer, kernels ``scale``× (100, 700, 500), AllReduce ``comm_us`` exposed."""
    return [aclnn("RmsNorm", 100 * scale, NORM, "AI_VECTOR_CORE"),
            aclnn("MatMulV3", 700 * scale, X), Comm("allReduce", comm_us),
            aclnn("FlashAttentionScore", 500 * scale, ATTN, "MIX_AIC")]


def verdict_pair(tmp_path, new_comm_us: float):
    base = write_profile(tmp_path, "base", comm_layer(1.0, 100.0) * K)
    new = write_profile(tmp_path, "new", comm_layer(0.85, new_comm_us) * K)
    return diff(base.path, new.path).report.to_dict()


def test_compute_gains_win_no_verdict(tmp_path):
    # Per step: computing 4·1300 = 5200 → 4·1105 = 4420 (−780); exposed AllReduce
    # 4·100 = 400 → 4·150 = 600 (+200, material: > 1 % of the 5630 µs step);
    # step 5630 → 5050 (−580). The step gained 580 µs, more than comm grew (200).
    report = verdict_pair(tmp_path, 150.0)
    assert report["step"]["delta_us"] == pytest.approx(-580.0)
    assert report["step"]["status"] == "improved"
    assert "comm-hides-compute" not in by_id(report)


def test_small_comm_growth_is_no_verdict(tmp_path):
    # Exposed AllReduce 4·100 → 4·110 (+40 µs < 1 % of the 5630 µs step): immaterial.
    report = verdict_pair(tmp_path, 110.0)
    assert report["step"]["delta_us"] == pytest.approx(-740.0)
    assert "comm-hides-compute" not in by_id(report)


def test_gain_mostly_eaten_is_a_medium_verdict(tmp_path):
    # Exposed AllReduce 4·100 → 4·275 (+700): Δstep = −780 + 700 = −80 µs; the step
    # kept only 80 of the 780 µs compute gain → verdict, medium (step not slower).
    report = verdict_pair(tmp_path, 275.0)
    assert report["step"]["delta_us"] == pytest.approx(-80.0)
    hidden = by_id(report)["comm-hides-compute"]
    assert hidden["severity"] == "medium"
    assert hidden["data"]["delta_exposed_us"] == pytest.approx(700.0)
    assert report["fusion"] == []  # no fused op on either side
    assert "AllReduce" in hidden["detail"]  # names the comm type whose time grew


def test_gain_mostly_eaten_headline_wording(tmp_path):
    report = verdict_pair(tmp_path, 275.0)
    assert "communication add " not in report["headline"]


# ---------------------------------------------------------------- no fusion change


def test_same_ops_both_sides_no_fusion(tmp_path):
    base = write_profile(tmp_path, "base", fused_layer() * K)
    new = write_profile(tmp_path, "new", fused_layer(norm=94.0, attn=470.0, fused=665.0) * K)
    report = diff(base.path, new.path).report.to_dict()
    assert report["fusion"] == []
    assert not {f["id"] for f in report["findings"]} & {"mc2-split", "mc2-fused",
                                                        "comm-hides-compute"}
    fused = [o for o in report["operators"] if o["op_type"] == "MatmulAllReduce"]
    assert len(fused) == 1 and fused[0]["fusion"] is None
    assert fused[0]["status"] == "improved"  # 700 → 665: −5 %, every instance


# ---------------------------------------------------------------- naming variants


NAME_CASES = [
    # (Name, Type, Accelerator Core) → (op_type, family, category, core)
    ((FUSED_NAME, "MatmulAllReduce", "MIX_AIC"),
     ("MatmulAllReduce", "MatmulAllReduce", "mc2", "MIX_AIC")),
    (("MatmulAllReduce", "MatmulAllReduce", "AI_CORE"),
     ("MatmulAllReduce", "MatmulAllReduce", "mc2", "AI_CORE")),
    ((FUSED_NAME, "N/A", "N/A"), ("MatmulAllReduce", "MatmulAllReduce", "mc2", "UNKNOWN")),
    (("MatmulAllReduce", "N/A", "N/A"),
     ("MatmulAllReduce", "MatmulAllReduce", "mc2", "UNKNOWN")),
    (("MatmulAllReduceAicpu", "MatmulAllReduceAicpu", "AI_CPU"),
     ("MatmulAllReduceAicpu", "MatmulAllReduce", "mc2", "AI_CPU")),
    (("MatmulAllReduceAicpu", "N/A", "N/A"),
     ("MatmulAllReduceAicpu", "MatmulAllReduce", "mc2", "UNKNOWN")),
    (("aclnnAllGatherMatmul_AllGatherMatmul_AllGatherMatmul", "AllGatherMatmul", "MIX_AIC"),
     ("AllGatherMatmul", "AllGatherMatmul", "mc2", "MIX_AIC")),
    (("hcom_allReduce__586_0_1", "hcom_allReduce_", "HCCL"),
     ("AllReduce", "AllReduce", "communication", "COMM")),
    (("hcom_allGather__586_3_1", "N/A", "N/A"),
     ("AllGather", "AllGather", "communication", "COMM")),
    (("aclnnMatmul_MatMulV3Common_MatMulV3", "N/A", "N/A"),
     ("MatMulV3", "MatMul", "compute", "UNKNOWN")),
    (("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE"),
     ("MatMulV2", "MatMul", "compute", "AI_CORE")),
]


@pytest.mark.parametrize("raw, want", NAME_CASES, ids=[f"{c[0][0]}|{c[0][1]}|{c[0][2]}"
                                                       for c in NAME_CASES])
def test_canonical_names_of_fused_ops(raw, want):
    name, op_type, core = raw
    got = canonical_names(pd.Series([name]), pd.Series([op_type]), pd.Series([core])).iloc[0]
    assert (got["op_type"], got["family"], got["category"], got["core"]) == want


def test_aclnn_and_plain_fused_names_match_each_other(tmp_path):
    base = write_profile(tmp_path, "base", fused_layer() * K)
    new = write_profile(tmp_path, "new", fused_layer(name="MatmulAllReduce") * K)
    report = diff(base.path, new.path).report.to_dict()
    fused = [o for o in report["operators"] if o["family"] == "MatmulAllReduce"]
    assert len(fused) == 1
    assert (fused[0]["match_kind"], fused[0]["status"]) == ("exact", "unchanged")
    assert report["fusion"] == []


def test_level0_split_is_found_without_types_or_shapes(tmp_path):
    # Level0: Type and Accelerator Core are N/A, no shape columns; types come from names.
    base_layer = [*fused_layer()[:1], Kernel("MatmulAllReduce", "", "", 700.0),
                  *fused_layer()[2:]]
    base = write_profile(tmp_path, "base", base_layer * K, level0=True)
    new = write_profile(tmp_path, "new", [aclnn("RmsNorm", 94, NORM),
                                          Kernel("aclnnMatmul_MatMulV3Common_MatMulV3", "", "",
                                                 600.0),
                                          Comm("allReduce", 300.0),
                                          aclnn("FlashAttentionScore", 470, ATTN)] * K,
                        level0=True)
    header = (new.path.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).__next__()
    assert header.read_text().splitlines()[0] == ("Step Id,Name,Type,Accelerator Core,"
                                                   "Start Time(us),Duration(us),Wait Time(us),"
                                                   "Block Dim")
    report = diff(base.path, new.path).report.to_dict()
    assert len(report["fusion"]) == 1
    group = report["fusion"][0]
    assert (group["fused_type"], group["direction"]) == ("MatmulAllReduce", "split")
    assert group["split_counts"] == {"AllReduce": K, "MatMul": K}
    assert group["paired_by"] == "counts"  # no shapes at Level0
    assert {"mc2-split", "comm-hides-compute"} <= set(by_id(report))


def test_aicpu_companion_is_attributed_to_its_fused_family(tmp_path):
    # Base layer adds MatmulAllReduceAicpu (AI_CPU, 650 µs) beside each fused op: the
    # group still counts K fused ops per step, and its base time is 4·(700+650) = 5400.
    companion = Kernel("MatmulAllReduceAicpu", "MatmulAllReduceAicpu", "AI_CPU", 650.0,
                       beside=True)
    layer = fused_layer()
    base = write_profile(tmp_path, "base", [*layer[:2], companion, layer[2]] * K)
    new = write_profile(tmp_path, "new", split_layer() * K)
    assert base.mean("Computing") == pytest.approx(5200.0)  # hidden beside the fused op
    report = diff(base.path, new.path).report.to_dict()
    group = report["fusion"][0]
    assert (group["direction"], group["base_count"]) == ("split", K)
    assert group["base_total_us"] == pytest.approx(5400.0)
    row = next(o for o in report["operators"] if o["op_type"] == "MatmulAllReduceAicpu")
    assert (row["family"], row["category"], row["fusion"]) == ("MatmulAllReduce", "mc2",
                                                               "MatmulAllReduce")
    assert "removed-ops" not in by_id(report)


def test_all_gather_matmul_split(tmp_path):
    # AllGatherMatmul (x1 local 2048 rows, TP 2) → hcom_allGather + MatMulV3 on the
    # gathered 4096 rows.
    gathered = "4096,4096;4096,6144"
    base = write_profile(tmp_path, "base", [
        aclnn("RmsNorm", 100, NORM, "AI_VECTOR_CORE"),
        aclnn("AllGatherMatmul", 800, "2048,4096;4096,6144", "MIX_AIC")] * K)
    new = write_profile(tmp_path, "new", [
        aclnn("RmsNorm", 100, NORM, "AI_VECTOR_CORE"), Comm("allGather", 250.0),
        aclnn("MatMulV3", 640, gathered)] * K)
    report = diff(base.path, new.path).report.to_dict()
    assert [(g["fused_type"], g["direction"]) for g in report["fusion"]] == [
        ("AllGatherMatmul", "split")]
    assert report["fusion"][0]["split_counts"] == {"AllGather": K, "MatMul": K}
    # base 4·800 = 3200; new 4·250 + 4·640 = 3560 µs per step.
    assert report["fusion"][0]["base_total_us"] == pytest.approx(3200.0)
    assert report["fusion"][0]["new_total_us"] == pytest.approx(3560.0)
    assert "mc2-split" in by_id(report)


@pytest.mark.slow
def test_fusion_map_file_adds_a_fused_op(tmp_path):
    custom = "aclnnMatmulAllToAll_MatmulAllToAll_MatmulAllToAll"
    base = write_profile(tmp_path, "base", [
        aclnn("RmsNorm", 100, NORM, "AI_VECTOR_CORE"),
        Kernel(custom, "MatmulAllToAll", "MIX_AIC", 700.0, FUSED_SHAPES)] * K)
    new = write_profile(tmp_path, "new", [
        aclnn("RmsNorm", 100, NORM, "AI_VECTOR_CORE"), aclnn("MatMulV3", 600, X),
        Comm("alltoall", 300.0)] * K)
    fusion_map = tmp_path / "fusion.json"
    fusion_map.write_text(json.dumps({"MatmulAllToAll": {
        "split": ["MatMul", "AllToAll"], "compute": ["MatMul"], "comm": ["AllToAll"],
        "api": "my_mm_all_to_all", "min_cann": "9.0", "enable": "call my_mm_all_to_all"}}))

    plain = run_cli(base.path, new.path, "-o", tmp_path / "plain", "-q", "--no-charts")
    assert plain.exit_code == 0, plain.output
    assert json.loads((tmp_path / "plain" / "report.json").read_text())["fusion"] == []

    mapped = run_cli(base.path, new.path, "-o", tmp_path / "mapped", "-q", "--no-charts",
                     "--fusion-map", fusion_map)
    assert mapped.exit_code == 0, mapped.output
    report = json.loads((tmp_path / "mapped" / "report.json").read_text())
    assert [(g["fused_type"], g["direction"]) for g in report["fusion"]] == [
        ("MatmulAllToAll", "split")]
    assert report["fusion"][0]["split_counts"] == {"AllToAll": K, "MatMul": K}
    split = by_id(report)["mc2-split"]
    assert "call my_mm_all_to_all" in split["detail"]
    row = next(o for o in report["operators"] if o["op_type"] == "MatmulAllToAll")
    assert (row["category"], row["fusion"]) == ("mc2", "MatmulAllToAll")


@pytest.mark.slow
def test_library_fusion_map_option(tmp_path):
    """The same map through the library's Options."""
    base = write_profile(tmp_path, "base", [
        Kernel("MatmulAllToAll", "MatmulAllToAll", "MIX_AIC", 700.0, FUSED_SHAPES)] * K)
    new = write_profile(tmp_path, "new", [aclnn("MatMulV3", 600, X),
                                          Comm("alltoall", 300.0)] * K)
    fusion_map = tmp_path / "fusion.json"
    fusion_map.write_text(json.dumps({"MatmulAllToAll": {
        "split": ["MatMul", "AllToAll"], "compute": ["MatMul"], "comm": ["AllToAll"]}}))
    report = diff(base.path, new.path, Options(fusion_map=fusion_map)).report.to_dict()
    assert [g["fused_type"] for g in report["fusion"]] == ["MatmulAllToAll"]
    assert report["fusion"][0]["paired_by"] == "shapes"


@pytest.mark.slow
def test_two_fused_types_share_the_split_matmuls_without_double_claims(tmp_path):
    # Base per step: 2 MatmulAllReduce + 2 MatmulAllReduceAddRmsNorm, both on x1;x2 = X.
    # New per step: 3 MatMulV3 (X) and 4 AllReduce. The first group takes 2 of the 3
    # MatMuls it lost, the second only the 1 left: 3 claimed in all, never 4 (a key gives
    # no more than its count gain), so no negative remainder reaches the compute split.
    norm_fused = "aclnnMatmulAllReduceAddRmsNorm_MatmulAllReduceAddRmsNorm_" \
        "MatmulAllReduceAddRmsNorm"
    base = write_profile(tmp_path, "base", [
        Kernel(FUSED_NAME, "MatmulAllReduce", "MIX_AIC", 700.0, FUSED_SHAPES),
        Kernel(norm_fused, "MatmulAllReduceAddRmsNorm", "MIX_AIC", 750.0,
               FUSED_SHAPES + ";4096,4096")] * 2)
    new = write_profile(tmp_path, "new", [aclnn("MatMulV3", 600.0, X), Comm("allReduce", 300.0),
                                          aclnn("MatMulV3", 600.0, X), Comm("allReduce", 300.0),
                                          Comm("allReduce", 300.0), aclnn("MatMulV3", 600.0, X),
                                          Comm("allReduce", 300.0)])
    result = diff(base.path, new.path)
    groups = {g.fused_type: g for g in result.analysis.fusion}
    assert set(groups) == {"MatmulAllReduce", "MatmulAllReduceAddRmsNorm"}
    matmul = next(o for o in result.report.to_dict()["operators"] if o["op_type"] == "MatMulV3")
    key = matmul["key_id"]
    assert groups["MatmulAllReduce"].new_claims[key] == pytest.approx(2.0)
    assert groups["MatmulAllReduceAddRmsNorm"].new_claims[key] == pytest.approx(1.0)
    assert result.analysis.fusion_claims[1][key] == pytest.approx(3.0)
    # Every MatMul of new is a split op: like-for-like has nothing left to compare.
    assert result.analysis.compute.like_for_like_us == pytest.approx(0.0)
    assert result.analysis.compute.added_us == pytest.approx(0.0)
