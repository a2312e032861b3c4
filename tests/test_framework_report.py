"""The framework level and the comparability check as a reader of the report meets them.

Expected figures are computed here from the profiles' own files (kernel_details.csv,
step_trace_time.csv, profiler_info_<rank>.json) with pandas and json, not with the code
under test.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from profiles import Comm, Kernel, write_profile

from cann_diff.pipeline import diff
from cann_diff.render import write_report

MSI_NEW = REALDATA / "Ascend__msinsight/test/data/pytorch/text/level1"
MSI_OLD = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch/text/level1"
RANK0 = "rank0_ascend_pt"


def _kernel_us(rank_dir: Path) -> float:
    """All kernel time of a rank per step (µs), from kernel_details.csv."""
    table = pd.read_csv(rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                        usecols=["Step Id", "Duration(us)"])
    return float(table["Duration(us)"].sum()) / table["Step Id"].nunique()


def _stage_us(rank_dir: Path) -> float:
    table = pd.read_csv(rank_dir / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    return float(table["Stage"].mean())


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _html_text(path: Path) -> str:
    parser = _Text()
    parser.feed(path.read_text())
    return " ".join("".join(parser.parts).split())


@pytest.fixture(scope="module")
def rank0(tmp_path_factory):
    if not MSI_NEW.is_dir():
        pytest.skip("../shared/realdata is not beside the project: real-data test skips")
    result = diff(MSI_OLD / RANK0, MSI_NEW / RANK0)
    out = tmp_path_factory.mktemp("rank0")
    write_report(result.report, out, charts=False)
    return result, out


@pytest.mark.slow
@needs_realdata
def test_framework_summary_matches_the_kernel_files_and_the_step_figures(rank0):
    result, _ = rank0
    summary = result.report.framework_summary
    base, new = _kernel_us(MSI_OLD / RANK0), _kernel_us(MSI_NEW / RANK0)
    # Every kernel of this job is launched by a framework operator (trace flows).
    assert summary.attributed_base_us == pytest.approx(base, rel=1e-3)
    assert summary.attributed_new_us == pytest.approx(new, rel=1e-3)
    step = _stage_us(MSI_NEW / RANK0) - _stage_us(MSI_OLD / RANK0)
    assert summary.step_delta_us == pytest.approx(step, rel=1e-3)
    assert summary.outside_us == pytest.approx(step - (new - base), rel=1e-3)


@pytest.mark.slow
@needs_realdata
def test_the_framework_sentence_is_in_md_and_html_with_the_summary_numbers(rank0):
    result, out = rank0
    summary = result.report.framework_summary
    sentence = summary.sentence
    assert sentence.startswith(f"Framework operators explain "
                               f"{summary.delta_attributed_us / 1000:+.2f} of the "
                               f"{summary.step_delta_us / 1000:+.2f} ms step change")
    # The collective carries most of it, named with its own sign and status mark.
    allreduce = sum(op.delta_us for op in result.report.framework_ops
                    if op.name == "c10d::allreduce_")
    assert allreduce > 0.2 * summary.step_delta_us
    assert f"c10d::allreduce_ {allreduce / 1000:+.2f} ms" in sentence
    assert f"{summary.outside_us / 1000:+.2f} ms is outside" in sentence
    md = (out / "report.md").read_text()
    assert sentence.replace("_", "\\_") in md
    assert sentence in _html_text(out / "report.html")


@pytest.mark.slow
@needs_realdata
def test_n_of_m_counts_every_key_that_is_not_unchanged(rank0):
    result, out = rank0
    ops = result.report.framework_ops
    changed = sum(op.status != "unchanged" for op in ops)
    assert changed > 15  # the old text said the display limit, "15 of …"
    md = (out / "report.md").read_text()
    assert f"{changed} of {len(ops)} keys are not unchanged" in md
    shown = result.report.top_n
    assert f"{len(ops) - shown} more framework operator keys" in md


@pytest.mark.slow
@needs_realdata
def test_large_framework_moves_have_a_status_other_than_unchanged(rank0):
    result, _ = rank0
    by_name = {}
    for op in result.report.framework_ops:
        by_name.setdefault(op.name, []).append(op)
    for name in ("aten::convolution_backward", "aten::topk", "aten::_adaptive_avg_pool2d"):
        biggest = max(by_name[name], key=lambda op: abs(op.delta_us or 0))
        assert abs(biggest.delta_us) > 100
        assert biggest.status != "unchanged"
    mm = [op for op in by_name["aten::mm"] if op.input_shapes == "4096,32;32,9216"]
    assert mm and mm[0].status == "untested" and mm[0].p_value is None
    pool = [op for op in by_name["aten::max_pool2d_with_indices_backward"]
            if op.match_kind == "data-inputs"]
    assert pool and all(op.base_count > 0 and op.new_count > 0 for op in pool)


@pytest.mark.slow
@needs_realdata
def test_the_optimizer_rewrite_is_one_add_line_in_the_family_rollup(rank0):
    result, out = rank0
    family = {r.key: r for r in result.report.framework_rollup if r.level == "family"}
    names = {r.key: r for r in result.report.framework_rollup if r.level == "name"}
    forms = [k for k in names if re.fullmatch(r"aten::(_foreach_)?add_?", k)]
    assert len(forms) >= 3  # add_, add and the foreach forms are apart by name
    assert family["add"].delta_us == pytest.approx(sum(names[k].delta_us for k in forms))
    assert "| `add`" in (out / "report.md").read_text()


@pytest.mark.slow
@needs_realdata
def test_the_real_pair_is_not_a_like_for_like_upgrade(rank0):
    result, out = rank0
    info = [json.loads((d / RANK0 / "profiler_info_0.json").read_text())
            for d in (MSI_OLD, MSI_NEW)]
    stack = [i["config"]["common_config"]["with_stack"] for i in info]
    assert stack == [False, True]  # what the profiler settings say, independently
    found = {c.what: c for c in result.report.comparability}
    assert (found["profiler with_stack"].base, found["profiler with_stack"].new) == \
        ("false", "true")
    assert found["HCCL algorithm (AllReduce)"].new == "MESH-RING"
    assert "compute dtype mix" in found and "device" in found
    md = (out / "report.md").read_text()
    # said once, in the verdict's ⚠ caveats, under its line and causes
    block = md[md.index("**Verdict:**"):md.index("\n## ")]
    assert block.count("Not a like-for-like stack upgrade") == 1
    assert "profiler with\\_stack: `false` → `true` (profiler\\_info\\_0.json)" in block \
        or "profiler with_stack: `false` → `true` (profiler_info_0.json)" in block
    assert "Not a like-for-like stack upgrade:" in result.report.headline
    # The shape caveat names the chip and dtype change before guessing at the batch size.
    shapes = next(n.text for n in result.report.notes if n.code == "shapes-differ")
    assert shapes.index("device") < shapes.index("batch")


SCHEDULE = [Kernel("MatMul", "MatMulV3", "AI_CORE", 400.0, "4096,4096;4096,4096"),
            Comm("allReduce", 200.0)]


def test_a_like_for_like_pair_has_no_comparability_block(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE).path
    new = write_profile(tmp_path, "new", [SCHEDULE[0].scaled(1.2), SCHEDULE[1]]).path
    result = diff(base, new)
    assert result.report.comparability == ()
    assert "like-for-like stack upgrade" not in result.report.headline
    (tmp_path / "out").mkdir()
    write_report(result.report, tmp_path / "out", charts=False)
    assert "like-for-like stack upgrade" not in (tmp_path / "out/report.md").read_text()


def test_an_alias_map_entry_with_colons_extends_the_framework_families():
    from cann_diff.compare.framework_rollup import family_of
    from cann_diff.vocab import Vocabulary

    vocab = Vocabulary.build(alias_extra={"npu::npu_fused_matmul": "matmul", "Gemm": "MatMul"})
    names = pd.Series(["npu::npu_fused_matmul", "aten::addmm", "aten::relu_"])
    assert list(family_of(names, vocab.framework_families)) == ["matmul", "matmul", "relu"]
    assert "Gemm" not in vocab.framework_families  # a kernel alias stays a kernel alias
    assert vocab.aliases["Gemm"] == "MatMul"
