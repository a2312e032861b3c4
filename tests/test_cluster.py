"""Clusters: many ranks in one command, slow-rank detection, Dask backend.

Crafted 8-rank runs: every rank runs MatMul 1000 µs, FA 800 µs and an exposed AllReduce
300 µs per step (3 steps). In the "slow" new run rank 5's MatMul takes 1600 µs, so its
computing is 600 µs above the others' (2 + 1000 + 2 + 800 ≈ 1802 µs → 2402 µs).
"""

import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REALDATA, needs_realdata
from profiles import Comm, aclnn, texts, write_profile

from cann_diff.cli import main
from cann_diff.pipeline import Options, diff
from cann_diff.read import load_run

RANKS = tuple(range(8))


def schedule(slow_rank=None, factor=1.6):
    def ops(rank, step):
        matmul = 1000.0 * (factor if rank == slow_rank else 1.0)
        return [aclnn("MatMulV3", matmul, "4096,4096;4096,4096"),
                aclnn("FlashAttentionScore", 800.0, "1,16,4096,128", core="MIX_AIC"),
                Comm("allReduce", 300.0)]
    return ops


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    base = write_profile(root, "base", schedule(), ranks=RANKS)
    slow = write_profile(root, "slow", schedule(slow_rank=5), ranks=RANKS)
    even = write_profile(root, "even", schedule(), ranks=RANKS, noise=0.01, seed=3)
    fewer = write_profile(root, "fewer", schedule(), ranks=RANKS[:6])
    return {"base": base, "slow": slow, "even": even, "fewer": fewer}


@pytest.mark.slow
def test_all_ranks_read_and_per_rank_table(runs):
    result = diff(runs["base"], runs["slow"])
    ranks = result.comparison.ranks
    assert list(ranks["rank"]) == list(RANKS)
    delta = ranks.set_index("rank")["delta_stage_us"]
    assert delta[5] == pytest.approx(600.0, abs=1.0)  # 1600 − 1000 µs, exposed on rank 5
    assert delta.drop(5).abs().max() == pytest.approx(0.0, abs=1e-6)


@pytest.mark.slow
def test_slow_rank_is_named(runs):
    findings = diff(runs["base"], runs["slow"]).report.to_dict()["findings"]
    slow = [f for f in findings if f["id"] == "slow-rank"]
    assert slow and {f["data"]["rank"] for f in slow} == {5}
    assert "Rank 5" in slow[0]["title"]


@pytest.mark.slow
def test_no_slow_rank_when_ranks_are_even(runs):
    findings = diff(runs["base"], runs["even"]).report.to_dict()["findings"]
    assert not [f for f in findings if f["id"] == "slow-rank"]


@pytest.mark.slow
def test_mismatched_rank_sets_warn_not_crash(runs):
    result = diff(runs["base"], runs["fewer"])
    assert any("rank sets differ" in w for w in result.report.warnings)
    assert len(result.comparison.ranks) == 8  # union of ranks, NaN where a side lacks one


def test_jobs_give_the_same_numbers(runs):
    one = load_run(runs["slow"].path, jobs=1)
    two = load_run(runs["slow"].path, jobs=2)
    assert one.ops.equals(two.ops)
    assert one.steps.equals(two.steps)


@pytest.mark.slow
def test_report_has_rank_charts_and_section(runs, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(runs["base"]), str(runs["slow"]), "-o", str(out),
                                       "-q"])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert "## Per rank" in md and "](rank_heatmap.png)" in md
    assert (out / "rank_heatmap.png").stat().st_size > 1000
    report = json.loads((out / "report.json").read_text())
    assert len(report["ranks"]) == 8
    table = pd.read_csv(out / "ranks.csv").set_index("rank")
    assert list(table.index) == list(RANKS)
    assert table.loc[5, "delta_stage_us"] == pytest.approx(600.0, abs=1.0)
    assert table.drop(5)["delta_stage_us"].abs().max() == pytest.approx(0.0, abs=1e-3)


@pytest.mark.slow
def test_markdown_shows_top_ranks_and_points_to_the_csv(runs, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(runs["base"]), str(runs["slow"]), "-o", str(out),
                                       "-q", "--no-charts", "--top", "3"])
    assert result.exit_code == 0, result.output
    section = (out / "report.md").read_text().split("## Per rank")[1].split("\n## ")[0]
    assert "Showing the 3 ranks that moved most" in section and "ranks.csv" in section
    table_rows = [line for line in section.splitlines() if line.startswith("|")][2:]
    assert len(table_rows) == 3 and table_rows[0].startswith("| 5 ")
    assert len(pd.read_csv(out / "ranks.csv")) == 8
    # The same directory reused for a one-rank pair: no stale eight-rank table is left.
    one = write_profile(tmp_path, "one", schedule(), ranks=(0,))
    result = CliRunner().invoke(main, [str(one), str(one), "-o", str(out), "--no-charts"])
    assert result.exit_code == 0, result.output
    assert "replacing report.md, report.json, ranks.csv" in result.output
    assert pd.read_csv(out / "ranks.csv")["rank"].tolist() == [0]


@pytest.mark.slow
def test_dask_local_cluster_gives_the_same_numbers(runs):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        on_dask = diff(runs["base"], runs["slow"], Options(scheduler=cluster.scheduler_address))
    local = diff(runs["base"], runs["slow"])
    assert on_dask.report.to_dict() == local.report.to_dict()


def test_dask_worker_processes_same_report_and_bad_rank_exit_2(runs, tmp_path):
    """Dask workers in their own processes hand back results and errors pickled."""
    distributed = pytest.importorskip("distributed")
    bad = tmp_path / "bad"
    shutil.copytree(runs["slow"], bad)
    rank3 = next(p for p in bad.iterdir() if p.name.startswith("node0_4003_"))
    kernels = rank3 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    kernels.write_text("Name,Type\nMatMul,MatMul\n")  # no Duration(us): unusable
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        on_dask = diff(runs["base"], runs["slow"], Options(scheduler=address))
        result = CliRunner().invoke(main, [str(runs["base"]), str(bad), "--scheduler",
                                           address, "-q", "--no-charts",
                                           "-o", str(tmp_path / "out")])
    assert on_dask.report.to_dict() == diff(runs["base"], runs["slow"]).report.to_dict()
    assert result.exit_code == 2, result.output
    assert "kernel_details.csv" in result.output and "internal error" not in result.output


@pytest.mark.slow
def test_unreachable_scheduler_is_exit_2(runs):
    pytest.importorskip("distributed")
    result = CliRunner().invoke(main, [str(runs["base"]), str(runs["slow"]), "--scheduler",
                                       "tcp://127.0.0.1:9", "--scheduler-timeout", "0.5",
                                       "-q", "--no-charts"])
    assert result.exit_code == 2
    assert "Dask scheduler" in result.output and "internal error" not in result.output


@pytest.mark.slow
@needs_realdata
def test_cluster_analysis_output_pair(tmp_path):
    test_data = REALDATA / "Ascend__msinsight/server/src/test/test_data"
    base = tmp_path / "base" / "cluster_analysis_output"
    shutil.copytree(test_data / "baseline_cluster/cluster_analysis_output", base)
    new = test_data / "cluster_analysis_output"
    result = diff(base, new)
    # 16 rank rows in cluster_step_trace_time.csv, Type == "rank"
    with open(new / "cluster_step_trace_time.csv") as handle:
        rows = [line.split(",") for line in handle.read().splitlines()[1:]]
    rank_rows = [r for r in rows if r[1] == "rank"]
    assert len(result.comparison.ranks) == len({r[2] for r in rank_rows}) == 16
    stage = {int(r[2]): float(r[8]) for r in rank_rows}
    got = result.comparison.ranks.set_index("rank")["new_stage"]
    assert all(got[rank] == pytest.approx(value) for rank, value in stage.items())
    assert any("no kernel rows" in w.text for w in result.report.new.warnings)


@needs_realdata
def test_cann83_job_reads_its_ranks_and_names_the_ones_without_kernels():
    # rank_1 and rank_3 hold step_trace_time.csv, communication.json and analysis.db but
    # no kernel_details.csv: they are read for those, and named.
    root = REALDATA / "Ascend__msinsight/test/st/level2"
    run = load_run(root)
    assert run.meta.ranks == (0, 1, 2, 3)
    assert run.ranks_without_kernels == (1, 3)
    assert "ranks without kernels: 1, 3 (step breakdown, communication only)" in texts(
        run.warnings)
    assert set(run.summary.ops["rank"]) == {0, 2}
    for rank in (1, 3):
        with open(root / f"rank_{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv") \
                as handle:
            header, row = (line.split(",") for line in handle.read().splitlines()[:2])
        stage = float(row[header.index("Stage")])
        assert run.steps.set_index("rank").loc[rank, "stage"] == pytest.approx(stage)
        ops = json.loads((root / f"rank_{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                                 "communication.json").read_text())["step13"]
        count = sum(len([k for k in by_op if not k.startswith("Total")])
                    for by_op in ops.values())
        assert run.summary.comm.groupby("rank")["ops"].sum()[rank] == count


@pytest.mark.parametrize("header, rows", [
    # no Step column (msprof-analyze writes one, but it may be empty or absent)
    ("Type,Index,Stage,Computing,Communication(Not Overlapped),Free",
     ["rank,0,100,50,30,20", "rank,1,110,55,35,20"]),
])
def test_cluster_summary_without_step_column(tmp_path, header, rows):
    # base: stage 100 and 110 µs; new: every rank +30 µs of free time → step 105 → 135 µs
    for name, extra in (("base", 0), ("new", 30)):
        folder = tmp_path / name / "cluster_analysis_output"
        folder.mkdir(parents=True)
        lines = [header] + [",".join(r.split(",")[:2] + [str(float(r.split(",")[2]) + extra)]
                                     + r.split(",")[3:5] + [str(float(r.split(",")[5]) + extra)])
                            for r in rows]
        (folder / "cluster_step_trace_time.csv").write_text("\n".join(lines) + "\n")
    result = diff(tmp_path / "base" / "cluster_analysis_output",
                  tmp_path / "new" / "cluster_analysis_output")
    assert result.report.step.base_us == pytest.approx(105.0)
    assert result.report.step.new_us == pytest.approx(135.0)
    assert result.report.step.breakdown.free.delta_us == pytest.approx(30.0)


def test_cluster_json_with_wrong_shape_is_exit_2(tmp_path):
    for name in ("base", "new"):
        folder = tmp_path / name / "cluster_analysis_output"
        folder.mkdir(parents=True)
        (folder / "cluster_step_trace_time.csv").write_text(
            "Type,Index,Stage,Computing,Communication(Not Overlapped),Free\nrank,0,1,1,0,0\n")
        (folder / "cluster_communication.json").write_text('{"g": {"step1": ["x"]}}')
    result = CliRunner().invoke(main, [str(tmp_path / "base" / "cluster_analysis_output"),
                                       str(tmp_path / "new" / "cluster_analysis_output"),
                                       "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 2
    assert "cluster_communication.json" in result.output
    assert "internal error" not in result.output


@pytest.mark.slow
def test_slow_rank_tells_waiting_from_transfer(tmp_path):
    # tests/profiles.py writes communication.json with transit = 0.6 × elapse and wait =
    # 0.3 × elapse. New: rank 5's MatMul is 600 µs slower and every other rank's AllReduce
    # 600 µs longer, so the others' transit grows by 360 µs and their wait by 180 µs per
    # step: by these files the growth is transfer.
    def ops(rank, step, slow=False):
        matmul = 1600.0 if (slow and rank == 5) else 1000.0
        comm = 900.0 if (slow and rank != 5) else 300.0
        return [aclnn("MatMulV3", matmul, "4096,4096;4096,4096"), Comm("allReduce", comm)]

    base = write_profile(tmp_path, "base", lambda r, s: ops(r, s), ranks=RANKS)
    new = write_profile(tmp_path, "new", lambda r, s: ops(r, s, slow=True), ranks=RANKS)
    findings = [f for f in diff(base, new).report.to_dict()["findings"] if f["id"] == "slow-rank"]
    computing = [f for f in findings if f["data"]["metric"] == "computing"]
    assert computing and computing[0]["data"]["rank"] == 5
    assert computing[0]["data"]["communication_growth"] == "transfer"
    assert "0.36 ms of transfer" not in computing[0]["detail"]  # wording: transit first
    assert "transfer time changed by 0.36 ms" in computing[0]["detail"]


@pytest.mark.parametrize("d_wait, d_transit, want", [(180.0, 0.0, "waiting"),
                                                     (180.0, 360.0, "transfer"),
                                                     (0.0, 0.0, "transfer")])
def test_waiting_or_transfer_rule(d_wait, d_transit, want):
    import pandas as pd

    from cann_diff.findings.slow_rank import _waiting_or_transfer

    ranks = pd.DataFrame({"rank": [0, 1, 2, 3], "base_wait_us": 100.0,
                          "new_wait_us": [100.0 + d_wait] * 3 + [100.0],
                          "base_transit_us": 50.0,
                          "new_transit_us": [50.0 + d_transit] * 3 + [50.0]})
    assert _waiting_or_transfer(ranks, 3)[1] == want
