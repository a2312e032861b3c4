"""Charts a reviewer can trust: axes from zero, labels on their bars, legends outside the
data, a colour-blind-safe palette, significance marked, no chart without data; and the
compute-family split behind one of them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from conftest import DATA
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from profiles import aclnn, memory_report, write_profile

from cann_diff.compare.families import compare_families
from cann_diff.pipeline import diff
from cann_diff.read import read_memory
from cann_diff.render import charts, write_report

# Okabe & Ito's eight colours, and the greys used for "no change" / free time.
OKABE_ITO = {"#000000", "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00",
             "#cc79a7"}
GREYS = {"#999999", "#bbbbbb", "#222222", "#eeeeee"}
MI_TEXT = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text"


@pytest.fixture(scope="module")
def example(example_report):
    return example_report


@pytest.fixture(scope="module")
def levels():
    return diff(MI_TEXT / "level1/rank0_ascend_pt", MI_TEXT / "level2/rank0_ascend_pt").report


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def bars(ax) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def legend_outside(fig, ax) -> bool:
    fig.canvas.draw()
    legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    assert legends, "the chart has no legend"
    box = ax.get_window_extent()
    return all(not legend.get_window_extent().overlaps(box) for legend in legends)


# --------------------------------------------------------------------------- waterfall


@pytest.mark.slow
def test_waterfall_starts_at_zero_and_labels_sit_on_their_bars(example):
    fig = charts.waterfall_figure(example)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0  # +8 % drawn as +8 %, not as 2×
    markers = [line for line in ax.lines if line.get_linestyle() == "-"]
    for text in ax.texts:
        x, y = text.get_position()
        on_bar = any(abs(b.get_x() + b.get_width() / 2 - x) < 1e-9 and
                     abs(max(b.get_y(), b.get_y() + b.get_height()) - y) < 1e-9
                     for b in bars(ax))
        on_marker = any(abs(line.get_xdata()[0] + 0.4 - x) < 1e-9 and
                        abs(line.get_ydata()[0] - y) < 1e-9 for line in markers)
        assert on_bar or on_marker, f"label {text.get_text()!r} floats at ({x}, {y})"
    # The example's breakdown (49.40 → 46.36 computing, 4.32 → 11.62 exposed): the
    # computing bar saves time (blue), the communication bar adds it (vermillion).
    deltas = {round(b.get_height(), 2): to_hex(b.get_facecolor()) for b in bars(ax)}
    assert deltas[-3.03] == "#0072b2" and deltas[7.3] == "#d55e00"
    assert "Δ bubble" not in [t.get_text() for t in ax.get_xticklabels()]  # 0 on both sides
    assert legend_outside(fig, ax)


def test_waterfall_marks_a_change_too_small_to_see_instead_of_a_floating_label(levels):
    # level1 → level2: computing 8.87 → 8.87 ms (Δ -0.01 ms of a 136 ms step).
    fig = charts.waterfall_figure(levels)
    ax = fig.axes[0]
    assert all(abs(b.get_height()) > 0.136 for b in bars(ax))  # no zero-height bars
    label = next(t for t in ax.texts if t.get_text() == "-0.01")
    x, y = label.get_position()
    assert any(isinstance(line, Line2D) and abs(line.get_ydata()[0] - y) < 1e-9 and
               line.get_xdata()[0] < x < line.get_xdata()[1] for line in ax.lines)


# --------------------------------------------------------------------------- top movers


def test_top_movers_leave_out_the_mc2_rows_and_mark_what_is_not_significant(example):
    fig = charts.top_movers_figure(example)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    claimed = [op for op in example.operators if op.fusion]
    assert claimed and not any(op.op_type.startswith("MatmulAllReduce") for op in
                               charts.movers(example))
    assert not any("MatmulAllReduce" in label or "AllReduce *" in label for label in labels)
    assert labels[0] == "MatMulV2→MatMulV3 4096,4096;4096,4096"  # -604.7 µs, the largest left
    by_label = dict(zip(labels, bars(ax)))
    # -4.7 % per instance, p < 0.001: significant but under the 5 % threshold, so
    # unchanged — neither "~" (it is significant) nor faster: grey, with its word.
    small = by_label["FlashAttentionScoreGrad 1,16,4096,128;1,16,4096,128… [unchanged]"]
    loud = by_label["MatMulV2→MatMulV3 4096,4096;4096,4096"]  # improved
    assert not small.get_hatch() and to_hex(small.get_facecolor()) == charts.NEUTRAL.lower()
    assert not loud.get_hatch() and loud.get_alpha() in (None, 1)
    assert to_hex(loud.get_facecolor()) == charts.FASTER.lower()
    legend = fig.legends[0]
    # A swatch for each look drawn: the example's movers are improved keys and keys the
    # rules never call slower or faster, none of them slower or "~".
    assert [t.get_text() for t in legend.get_texts()] == ["faster", charts.NEVER_CALLED]
    assert "MC2" in legend.get_title().get_text()
    assert legend_outside(fig, ax)


def test_top_movers_explain_the_star_of_keys_without_shapes(levels):
    fig = charts.top_movers_figure(levels)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any(label.startswith("AllReduce * ") for label in labels)  # no shapes on comm
    assert "no input shapes" in fig.legends[0].get_title().get_text()


# --------------------------------------------------------------------------- ranks


def test_rank_steps_legend_is_outside_the_bars(example):
    fig = charts.rank_steps_figure(example)
    assert fig.axes[0].get_ylim()[0] == 0
    assert legend_outside(fig, fig.axes[0])


@pytest.mark.slow
def test_disjoint_rank_sets_draw_no_heatmap_and_say_why(tmp_path):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8")]
    base = write_profile(tmp_path, "base", schedule, ranks=(0,)).path
    new = write_profile(tmp_path, "new", schedule, ranks=(2,)).path
    report = diff(base, new).report
    assert not charts.has_rank_change(report)
    (tmp_path / "out").mkdir()
    written = {p.name for p in write_report(report, tmp_path / "out")}
    assert "rank_heatmap.png" not in written and "rank_steps.png" in written
    md = (tmp_path / "out" / "report.md").read_text()
    assert "no rank is in both runs (base 0; new 2)" in md
    assert "rank_heatmap.png" not in md


# --------------------------------------------------------------------------- memory


def test_memory_axis_starts_at_zero():
    base = read_memory(DATA / "memory" / "test_rank_1")
    new = read_memory(DATA / "memory" / "test_rank_0")
    comparison = memory_report(base, new)
    assert comparison.base_timeline.time_ms  # there is something to draw
    fig = charts.memory_figure(comparison)
    assert fig.axes[0].get_ylim()[0] == 0


@pytest.mark.slow
def test_gpu_traces_have_no_empty_memory_table_or_chart(tmp_path):
    # HTA's trace_compare pair: memcpy kernels (so a copies table) but no memory samples.
    hta = DATA / "formats" / "hta"
    report = diff(hta / "base.json.gz", hta / "test.json.gz").report
    assert report.memory is not None and report.memory.copies_total is not None
    (tmp_path / "out").mkdir()
    written = {p.name for p in write_report(report, tmp_path / "out")}
    assert "memory.png" not in written
    md = (tmp_path / "out" / "report.md").read_text()
    section = md.split("## Device memory", 1)[1]
    assert "**Peak memory:** not compared" in section
    assert "| Peak reserved" not in section and "memory.png" not in section
    assert "### Host↔device copies" in section


# --------------------------------------------------------------------------- palette


@pytest.mark.parametrize("name", ["step_breakdown", "waterfall", "top_movers", "rank_steps",
                                  "families", "rank_heatmap"])
def test_every_chart_uses_the_colour_blind_safe_palette(example, name):
    fig = getattr(charts, f"{name}_figure")(example)
    used = {to_hex(p.get_facecolor()) for ax in fig.axes for p in bars(ax)
            if p.get_visible() and p.get_facecolor()[3] > 0}
    used -= {"#ffffff"}
    assert used <= OKABE_ITO | GREYS, used - OKABE_ITO - GREYS


@pytest.mark.slow
def test_charts_are_deterministic(example, tmp_path):
    first = charts.draw_top_movers(example, tmp_path / "a.png").read_bytes()
    again = charts.draw_top_movers(example, tmp_path / "b.png").read_bytes()
    assert first == again


# --------------------------------------------------------------------------- families


def test_compute_families_sum_each_group_and_keep_the_table_order():
    rows = [  # category, family, base count, new count, base µs, new µs (per step)
        ("compute", "MatMul", 10, 12, 100.0, 120.0),
        ("compute", "BatchMatMul", 5, 5, 50.0, 40.0),
        ("compute", "FlashAttentionScore", 2, 2, 30.0, 33.0),
        ("compute", "Conv2D", 1, 1, 10.0, 10.0),
        ("compute", "RmsNorm", 4, 4, 8.0, 8.0),
        ("communication", "AllReduce", 1, 3, 20.0, 60.0),
        ("mc2", "MatmulAllReduce", 2, 0, 70.0, 0.0),
        ("memcpy", "MEMCPY_ASYNC", 1, 1, 5.0, 5.0),
        ("aicpu", "DropOutGenMask", 1, 1, 2.0, 2.0),
    ]
    ops = pd.DataFrame(rows, columns=["category", "family", "base_count", "new_count",
                                      "base_total_us", "new_total_us"])
    table = compare_families(ops).set_index("family")
    assert list(table.index) == ["Communication", "MC2 (MatMul + comm)", "SDMA / memcpy",
                                 "AI CPU", "FlashAttention", "Conv", "MatMul / Cube",
                                 "Vector / other AI Core"]
    cube = table.loc["MatMul / Cube"]
    assert (cube.base_count, cube.new_count) == (15, 17)
    assert (cube.base_total_us, cube.new_total_us, cube.delta_us) == (150.0, 160.0, 10.0)
    assert cube.base_share_pct == pytest.approx(150 / 295 * 100)  # base kernels: 295 µs
    assert cube.new_share_pct == pytest.approx(160 / 278 * 100)  # new kernels: 278 µs
    assert table.loc["Communication", "delta_pct"] == pytest.approx(200.0)
    assert table.loc["FlashAttention", "delta_pct"] == pytest.approx(10.0)
    assert table["base_total_us"].sum() == pytest.approx(295.0)


@pytest.mark.slow
def test_the_report_carries_the_families_and_both_formats_show_them(example, tmp_path):
    families = {f.family: f for f in example.families}
    # The example's MatmulAllReduce (8 per step, 5.11 ms) is fused in base only.
    assert families["MC2 (MatMul + comm)"].base_count == 8
    assert families["MC2 (MatMul + comm)"].new_count == 0
    write_report(example, tmp_path)
    assert "## Compute by family" in (tmp_path / "report.md").read_text()
    assert "Compute by family" in (tmp_path / "report.html").read_text()
    assert (tmp_path / "families.png").stat().st_size > 1000
