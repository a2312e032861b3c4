"""Why each operator changed, as the reviewer reads it: the why column of the operator
tables, the "Why operators changed" section and the pipes chart (render/why_section.py,
render/charts.py ``pipes_figure``).

* a crafted pair whose answer is worked out by hand: one MatMul shape on 24 → 12 cores,
  100 → 200 µs per step, cube 0.8 / MTE2 0.3 → cube 0.4 / MTE2 0.7 (cube-bound →
  memory-bound), beside an Add that does not change: its row says so, the section ranks
  the block dim and the bound shift at +100 µs, and the pipes chart draws 0.8, 0.3 →
  0.4, 0.7 (the other pipes are not in the profile: left out, not drawn as 0);
* the real 910A → 910B text Level1 pair: TransData's rows say core AI_CORE →
  AI_VECTOR_CORE and MatMul's its block dim and formats, the values computed here from
  the two kernel_details.csv with pandas; the section's rows are the sums of report.json's
  keys, largest |Δ| first; every bar of the pipes chart is a ratio of report.json;
* a Level0 side says "not recorded (aic_metrics=…)", the setting read from its
  profiler_info json, never a guess.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import DATA, REALDATA, needs_realdata
from matplotlib.patches import Rectangle
from test_attributes_compare import HALVED, OUT, PAIR, cores, crafted
from test_chart_text import problems

from cann_diff import format as fmt
from cann_diff.pipeline import diff
from cann_diff.render import charts
from cann_diff.render.chart_list import pipe_movers, wanted
from cann_diff.render.content import WHY_HEADER, report_blocks
from cann_diff.render.document import Table, plain_text
from cann_diff.render.markdown import render_markdown
from cann_diff.render.why_section import HEADERS

SHOWN_PIPES = {"cube": "cube", "mte2": "MTE2"}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def halved(tmp_path_factory):
    root = tmp_path_factory.mktemp("why_halved")
    base = crafted(root, "base", HALVED[0], cores("24", "0.8", "0.3"), seed=1)
    new = crafted(root, "new", HALVED[1], cores("12", "0.4", "0.7"), seed=2)
    return diff(base, new).report


def why_rows(report) -> dict[str, list[str]]:
    """Per operator, the why cells of every operator table that has the column."""
    out: dict[str, list[str]] = {}
    for block in report_blocks(report):
        if isinstance(block, Table) and block.headers[-1] == WHY_HEADER:
            for row in block.rows:
                name = plain_text(row[0].text).rstrip("⁰¹²³⁴⁵⁶⁷⁸⁹\u2009")
                out.setdefault(name, []).append(plain_text(row[-1].text))
    return out


def section(report) -> dict[str, tuple[int, float]]:
    """The section's rows: {change: (keys, Δ µs per step)}, in the order shown."""
    [table] = [b for b in report_blocks(report) if isinstance(b, Table)
               and b.headers == HEADERS]
    return {plain_text(row[0].text): (int(row[1].sort), row[4].sort) for row in table.rows}


# --------------------------------------------------------------------------- crafted


def test_the_halved_matmul_says_why_in_its_row(halved):
    rows = why_rows(halved)
    [matmul] = rows["MatMulV3"]
    assert matmul.startswith("block dim 24→12")
    assert "cube-bound → memory-bound (MTE2 0.30→0.70)" in matmul
    # The Add changed nothing and its time did not move: its row (if any) says nothing.
    assert all(cell == "–" for cell in rows.get("Add", []))
    markdown = render_markdown(halved)
    assert "| why " in markdown and "block dim 24→12" in markdown


def test_the_section_ranks_block_dim_and_bound_at_the_time_they_carry(halved):
    # 100 → 200 µs per step on the MatMul (noise σ 0.5 %): +100 µs under each change.
    rows = section(halved)
    assert list(rows) == ["block dim", "bound: cube-bound → memory-bound"] or \
        list(rows) == ["bound: cube-bound → memory-bound", "block dim"]
    for keys, delta in rows.values():
        assert keys == 1
        assert delta == pytest.approx(100.0, rel=0.03)


def test_the_pipes_chart_draws_the_hand_computed_ratios(halved):
    assert "pipes" in wanted(halved)
    [op] = pipe_movers(halved)
    fig = charts.FIGURES["pipes"](halved)
    [ax] = fig.axes
    bars = sorted((p.get_x(), p.get_height()) for p in ax.patches if isinstance(p, Rectangle))
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == list(SHOWN_PIPES.values())  # only the pipes the profile records
    # Per pipe, base then new: cube 0.8 → 0.4, MTE2 0.3 → 0.7.
    assert [h for _, h in bars] == pytest.approx([0.8, 0.4, 0.3, 0.7], abs=1e-9)
    assert [h for _, h in bars] == pytest.approx(
        [op.attributes[side]["pipes"][p] for p in SHOWN_PIPES for side in ("base", "new")])
    assert problems(fig) == []


def test_a_pair_without_pipes_draws_no_pipes_chart(tmp_path):
    base = crafted(tmp_path, "base", HALVED[0], lambda row: None, seed=1)
    new = crafted(tmp_path, "new", HALVED[1], lambda row: None, seed=2)
    report = diff(base, new).report
    assert "pipes" not in wanted(report)
    assert "pipes not recorded" in render_markdown(report)


# --------------------------------------------------------------------------- Level0


LEVEL = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text"


def test_a_level0_side_says_its_pipes_are_not_recorded_with_its_setting():
    info = json.loads(next((LEVEL / "level0/rank0_ascend_pt").glob("profiler_info_*.json"))
                      .read_text())
    metrics = info["config"]["experimental_config"]["_aic_metrics"]
    report = diff(LEVEL / "level0/rank0_ascend_pt", LEVEL / "level1/rank0_ascend_pt").report
    markdown = render_markdown(report).replace("\\_", "_")
    why = markdown.split("## Why operators changed", 1)[1].split("\n## ", 1)[0]
    [base_line] = [line for line in why.splitlines() if line.startswith("- base: ")]
    assert base_line.endswith(f"; pipes not recorded (aic_metrics={metrics}), so no bound")
    # Level0 writes Accelerator Core N/A and Block Dim 0: not recorded, never "0 cores".
    assert base_line.startswith("- base: core, block dim, ")
    assert "(Level0)" in base_line
    assert not [line for line in why.splitlines() if line.startswith("- new")]


@needs_realdata
def test_a_level0_pair_says_not_recorded_on_both_sides():
    root = "test/data/pytorch/text/level0"
    infos = [json.loads(next((REALDATA / repo / root / "rank0_ascend_pt")
                             .glob("profiler_info_*.json")).read_text())
             for repo in ("Ascend__msinsight@c1e639ee2", "Ascend__msinsight")]
    [metrics] = {i["config"]["experimental_config"]["_aic_metrics"] for i in infos}
    report = diff(REALDATA / "Ascend__msinsight@c1e639ee2" / root,
                  REALDATA / "Ascend__msinsight" / root).report
    text = render_markdown(report).replace("\\_", "_")
    [line] = [line for line in text.splitlines() if line.startswith("- base and new: ")]
    assert line.endswith(f"pipes not recorded (aic_metrics={metrics}), so no bound")
    assert "pipes" not in wanted(report)


# --------------------------------------------------------------------------- real pair


def _kernels(path: str) -> pd.DataFrame:
    return pd.read_csv(REALDATA / path / OUT / "kernel_details.csv")


def _modal(frame: pd.DataFrame, column: str):
    """The value of most kernel time (Duration(us)) in ``column``."""
    return frame.groupby(column)["Duration(us)"].sum().idxmax()


@pytest.fixture(scope="module")
def real():
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not beside the project")
    return diff(*(REALDATA / p for p in PAIR)).report


@needs_realdata
def test_transdata_rows_say_their_core_moved(real):
    base, new = (_kernels(p) for p in PAIR)
    cores_seen = (_modal(base[base["Type"] == "TransData"], "Accelerator Core"),
                  _modal(new[new["Type"] == "TransData"], "Accelerator Core"))
    assert cores_seen == ("AI_CORE", "AI_VECTOR_CORE")
    said = [cell for cell in why_rows(real)["TransData"] if cell != "–"]
    assert said
    assert all(f"core {cores_seen[0]}→{cores_seen[1]}" in cell for cell in said)


@needs_realdata
def test_matmul_rows_say_their_block_dim_and_formats(real):
    base, new = (_kernels(p) for p in PAIR)
    base_mm = base[base["Type"] == "MatMul"]
    new_mm = new[new["Type"].isin(["MatMulV2", "MatMulV3"])]
    base_dim = int(_modal(base_mm, "Block Dim"))
    new_dims = set(new_mm["Block Dim"].astype(int)) - {base_dim}
    [base_format] = set(base_mm["Input Formats"].str.split(";").explode())
    [new_format] = set(new_mm["Input Formats"].str.split(";").explode()
                       .str.removeprefix("FORMAT_"))
    said = [cell for name, cells in why_rows(real).items() if name.startswith("MatMul→")
            for cell in cells if cell != "–"]
    assert said
    for cell in said:
        assert any(f"block dim {base_dim}→{dim}" in cell for dim in new_dims), cell
        assert f"formats {base_format}→{new_format}" in cell


@needs_realdata
def test_the_section_sums_report_json_and_ranks_by_the_size_of_delta(real):
    ops = pd.DataFrame(real.to_dict()["operators"])
    ops = ops[ops["attributes"].notna() & ~ops["fusion"].astype(bool)]
    changed = ops.assign(change=ops["attributes"].map(lambda a: a["changed"])) \
        .explode("change").dropna(subset=["change"])
    sums = changed.groupby("change")["delta_us"].agg(["size", "sum"])
    rows = section(real)
    for attribute, label in (("core", "core"), ("block_dim", "block dim"),
                             ("input_formats", "formats"), ("implementation", "kernel")):
        keys, delta = rows[label]
        assert keys == sums.loc[attribute, "size"]
        assert delta == pytest.approx(sums.loc[attribute, "sum"])
    sizes = [abs(delta) for _, delta in rows.values()]
    assert sizes == sorted(sizes, reverse=True)
    [shown] = [b for b in report_blocks(real) if isinstance(b, Table) and b.headers == HEADERS]
    assert plain_text(shown.rows[0][4].text) == fmt.ms(list(rows.values())[0][1], signed=True)


@needs_realdata
def test_every_pipes_bar_is_a_ratio_of_the_report(real):
    keys = pipe_movers(real)
    fig = charts.FIGURES["pipes"](real)
    assert len(fig.axes) == len(keys) >= 4
    for ax, op in zip(fig.axes, keys):
        names = [t.get_text() for t in ax.get_xticklabels()]
        pipes = [p for p, name in charts.PIPE_LABELS.items() if name in names]
        heights = [p.get_height() for p in sorted(
            (p for p in ax.patches if isinstance(p, Rectangle)), key=lambda p: p.get_x())]
        expected = [op.attributes[side]["pipes"][p] for p in pipes for side in ("base", "new")]
        assert heights == pytest.approx(expected)
    assert problems(fig) == []
