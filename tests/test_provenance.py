"""Provenance: versions, device, host and collection time per side, in every format.

Expected values are read off the input files by eye (and written down here), never
taken from cann-diff's output.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, REALDATA, needs_realdata
from profiles import aclnn, write_profile

from cann_diff.cli import main
from cann_diff.pipeline import Options, diff
from cann_diff.read import load_run
from cann_diff.render.markdown import render_markdown

MI = REALDATA / "Ascend__msinsight"
MINDINSIGHT = REALDATA / "mindspore-ai__mindinsight/tests/utils/resource/profiler"
VLLM_PROF = (REALDATA / "vllm-project__vllm-ascend/.tmp_remote_patch/prof_unpack/"
             "PROF_GROUP_20260823_165254/PROF_Memory/"
             "PROF_000001_20260823165413436_00626258NIRJNPIC")
MI_TEXT = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text"
SCHEDULE = [aclnn("MatMulV3", 100.0, "8,8;8,8"), aclnn("RmsNorm", 20.0, "8,8")]


def utc(seconds: int) -> str:
    """Unix seconds as ISO 8601 UTC, through time.gmtime (not the code's datetime)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def add_to_profiler_info(run_dir: Path, **keys) -> None:
    for info in run_dir.glob("*_ascend_pt/profiler_info_*.json"):
        data = json.loads(info.read_text())
        info.write_text(json.dumps({**data, **keys}))


def add_prof_dir(rank_dir: Path, device: int, host: str = "node-a") -> None:
    """A PROF_* directory as torch_npu leaves it: host/info.json and device_<id>/."""
    prof = rank_dir / "PROF_000001_20250109171251000_ABCDEFGHIJKLMNOP"
    (prof / "host").mkdir(parents=True)
    (prof / f"device_{device}").mkdir()
    (prof / "host" / "info.json").write_text(json.dumps(
        {"drvVersion": 467992, "platform_version": "5", "hostname": host}))


# --------------------------------------------------------------------------- crafted


def test_torch_npu_text_export_records_versions_driver_device_host_and_time(tmp_path):
    run_dir = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    # 1_700_000_000 s is 2023-11-14T22:13:20Z.
    add_to_profiler_info(run_dir, cann_version="8.0.RC2", torch_npu_version="2.1.0.post6",
                         end_info={"collectionTimeEnd": 1_700_000_000_000_000_000})
    for rank, rank_dir in enumerate(sorted(run_dir.glob("*_ascend_pt"))):
        add_prof_dir(rank_dir, device=rank)
    meta = load_run(run_dir).meta
    assert (meta.cann_version, meta.torch_npu_version) == ("8.0.RC2", "2.1.0.post6")
    assert meta.driver_version == "467992"  # drvVersion as recorded, undecoded
    assert meta.device == "Ascend910B"  # platform_version 5 in msprof's CHIP_TABLE
    assert meta.device_count == 2  # device_0 and device_1 on host node-a
    assert meta.host == "node-a"  # info.json wins over the directory's "node0" prefix
    assert meta.collected == "2023-11-14T22:13:20Z"
    assert meta.sources["cann"] == "profiler_info_0.json"
    assert meta.sources["driver"] == "PROF_*/host/info.json"


def test_unknown_facts_name_the_file_that_would_hold_them(tmp_path):
    run_dir = write_profile(tmp_path, "base", SCHEDULE).path
    meta = load_run(run_dir).meta
    assert meta.cann_version is None and meta.driver_version is None and meta.device is None
    # The file is there but older torch_npu did not write the key: name the file read.
    assert meta.sources["cann"] == "profiler_info_0.json: no cann_version"
    assert meta.sources["driver"] == "PROF_*/host/info.json: drvVersion"
    # write_profile's rank directory is node0_4000_20250109171251000_ascend_pt.
    assert meta.host == "node0" and meta.sources["host"] == "directory name"
    assert meta.collected == "2025-01-09T17:12:51"  # local time: no zone
    report = diff(run_dir, run_dir).report
    md = render_markdown(report)
    assert "| CANN              | not recorded (`profiler_info_0.json`: no cann_version)" in md
    assert "2025-01-09 17:12:51 (local time)" in md


def test_ranks_that_disagree_on_a_version_say_so(tmp_path):
    run_dir = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    ranks = sorted(run_dir.glob("*_ascend_pt"))
    for rank_dir, version in zip(ranks, ("8.0.RC2", "8.0.RC3")):
        info = rank_dir / f"profiler_info_{ranks.index(rank_dir)}.json"
        info.write_text(json.dumps({**json.loads(info.read_text()), "cann_version": version}))
    assert load_run(run_dir).meta.cann_version == "mixed: 8.0.RC2 (1 rank), 8.0.RC3 (1 rank)"


def test_report_json_and_markdown_carry_the_provenance(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE).path
    add_to_profiler_info(base, cann_version="8.0.RC2", torch_npu_version="2.1.0.post6")
    report = diff(base, base).report.to_dict()
    side = report["base"]
    assert side["versions"] == {"cann": "8.0.RC2", "torch_npu": "2.1.0.post6"}
    assert side["driver"] is None and side["device"] is None and side["device_count"] is None
    assert side["host"] == "node0" and side["collected"] == "2025-01-09T17:12:51"
    assert set(side["sources"]) == {"cann", "torch_npu", "driver", "device", "device_count",
                                    "profiler_level", "collected", "host", "world_size",
                                    "parallel", "environment"}
    # write_profile writes no profiler_metadata.json: name the file that would hold them.
    assert side["sources"]["world_size"] == "profiler_metadata.json: distributed_args"
    assert report["tool"]["name"] == "cann-diff"
    assert report["invocation"] is None  # a library call: no command line, no date


# --------------------------------------------------------------------------- labels


@pytest.mark.slow
def test_same_directory_names_get_the_shortest_suffix_that_differs():
    # Both inputs end in rank0_ascend_pt/ASCEND_PROFILER_OUTPUT: the level directory
    # is the first part that differs.
    result = diff(MI_TEXT / "level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT",
                  MI_TEXT / "level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT")
    assert (result.report.base.label, result.report.new.label) == ("level1/rank0",
                                                                   "level2/rank0")
    assert "between level1/rank0 and level2/rank0" in result.report.headline


def test_same_directory_names_with_recorded_versions_are_named_by_version(tmp_path):
    base = write_profile(tmp_path / "a", "run", SCHEDULE).path
    new = write_profile(tmp_path / "b", "run", SCHEDULE).path
    add_to_profiler_info(base, cann_version="8.0.RC2")
    add_to_profiler_info(new, cann_version="8.1.RC1")
    report = diff(base, new).report
    assert (report.base.label, report.new.label) == ("CANN 8.0.RC2", "CANN 8.1.RC1")


def test_a_run_compared_with_itself_is_told_apart_by_side(tmp_path):
    run_dir = write_profile(tmp_path, "run", SCHEDULE).path
    report = diff(run_dir, run_dir).report
    assert (report.base.label, report.new.label) == ("run (base)", "run (new)")


def test_given_labels_are_kept(tmp_path):
    run_dir = write_profile(tmp_path, "run", SCHEDULE).path
    report = diff(run_dir, run_dir, Options(base_label="a", new_label="b")).report
    assert (report.base.label, report.new.label) == ("a", "b")


# --------------------------------------------------------------------------- invocation


@pytest.mark.slow
def test_cli_records_the_command_line_and_the_date(tmp_path, monkeypatch):
    run_dir = write_profile(tmp_path, "run", SCHEDULE).path
    out = tmp_path / "out"
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    result = CliRunner().invoke(main, [str(run_dir), str(run_dir), "-o", str(out), "-q",
                                       "--no-charts", "--top", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    invocation = data["invocation"]
    # --quiet (like --jobs and --scheduler) changes how the tool runs, not the report.
    assert invocation["command"] == (f"cann-diff {run_dir} {run_dir} --out {out} --top 3 "
                                     "--no-charts")
    # Dated by the profiles' own collection time: the same profiles, the same bytes.
    assert invocation["date_source"] == "collected"
    assert invocation["date"] == max(data["base"]["collected"], data["new"]["collected"])
    md = (out / "report.md").read_text()
    assert (f"run as `{invocation['command']}`; dated {invocation['date']} (the newest "
            "collection time of the profiles)") in md


def test_source_date_epoch_dates_the_report_and_a_profile_without_a_time_the_run(
        tmp_path, monkeypatch):
    run_dir = write_profile(tmp_path, "run", SCHEDULE).path
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    result = CliRunner().invoke(main, [str(run_dir), str(run_dir), "-o", str(tmp_path / "a"),
                                       "-q", "--no-charts"])
    assert result.exit_code == 0, result.output
    invocation = json.loads((tmp_path / "a/report.json").read_text())["invocation"]
    assert invocation == {"command": invocation["command"], "date": "2023-11-14T22:13:20+00:00",
                          "date_source": "SOURCE_DATE_EPOCH"}
    from cann_diff.report import Invocation

    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    before = time.time()
    now = Invocation.now("cann-diff a b").dated_by_profiles([None, None])
    stamp = time.mktime(time.strptime(now.date[:19], "%Y-%m-%dT%H:%M:%S"))
    assert now.date_source == "run" and before - 2 <= stamp <= time.time() + 2


# --------------------------------------------------------------------------- real files


@pytest.mark.slow
@needs_realdata
def test_cann83_text_export():
    meta = load_run(MI / "test/st/level2/rank_0_ascend_pt", keep_rows=False).meta
    assert (meta.cann_version, meta.torch_npu_version) == ("8.3.RC1", "2.7.1")
    assert meta.profiler_level == "Level2"
    # end_info.collectionTimeEnd 1764246878131995320 ns
    assert meta.collected == utc(1764246878)
    assert meta.device is None and meta.host is None  # text export: no PROF_*, no db
    # profiler_metadata.json: distributed_args (tp 1, pp 2, dp 2, cp 1, ep 1, world 4) and
    # ENV_VARIABLES with two of nine variables set.
    assert meta.world_size == 4
    assert meta.parallel == "TP 1 · PP 2 · DP 2 · CP 1 · EP 1"
    assert meta.environment == ("ASCEND_GLOBAL_LOG_LEVEL=3, "
                                "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True")
    md = render_markdown(diff(MI / "test/st/level2/rank_0_ascend_pt",
                              MI / "test/st/level2/rank_2_ascend_pt").report)
    runs = md[md.index("## Runs compared"):].splitlines()[:30]
    rows = [line.split("|")[1].strip() for line in runs if line.startswith("|")]
    assert rows[rows.index("ranks"):rows.index("ranks") + 3] == ["ranks", "parallelism",
                                                                 "environment"]
    assert "| 0 (world size 4) " in md


@pytest.mark.slow
@needs_realdata
def test_db_export_device_and_host_from_the_db():
    meta = load_run(MI / "test/data/pytorch/db/level1", keep_rows=False).meta
    # NPU_INFO (0, Ascend910B) in rank 0's db, (1, Ascend910B) in rank 1's; HOST_INFO ubuntu.
    assert (meta.device, meta.device_count, meta.host) == ("Ascend910B", 2, "ubuntu")
    assert meta.sources["host"] == "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db: " \
                                   "HOST_INFO"
    assert meta.collected == utc(1736410576)  # rank 0 end_info.collectionTimeEnd


@needs_realdata
def test_msprof_2023_prof_directories():
    meta = load_run(MINDINSIGHT, keep_rows=False).meta
    # info.json.* platform_version "1" = Ascend910A; hostname A2007104679; device_0, device_1.
    assert (meta.device, meta.device_count, meta.host) == ("Ascend910A", 2, "A2007104679")
    # end_info.0: collectionTimeEnd 1692340082430569 µs = collectionDateEnd 14:28:02 (UTC+8)
    assert meta.collected == "2023-08-18T06:28:02Z"
    assert meta.sources["torch_npu"].startswith("n/a: ")
    assert meta.world_size is None and meta.parallel is None


@needs_realdata
def test_msprof_vllm_capture_driver_and_directory_time(tmp_path):
    prof = Path(shutil.copytree(VLLM_PROF, tmp_path / VLLM_PROF.name))
    meta = load_run(prof, keep_rows=False).meta
    # host/info.json: drvVersion 467992, platform_version "5", hostname localhost.localdomain
    assert (meta.driver_version, meta.device, meta.host) == ("467992", "Ascend910B",
                                                            "localhost.localdomain")
    assert meta.collected == "2026-08-23T16:54:13"  # PROF_000001_20260823165413436_…
    assert meta.device_count is None  # DeviceInfo is empty and there is no device_* dir


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_tests_data_copies_name_their_profiler_info(level):
    meta = load_run(MI_TEXT / level / "rank0_ascend_pt").meta
    assert meta.profiler_level == level.capitalize()
    assert meta.sources["profiler_level"] == "profiler_info_0.json"


def test_source_date_epoch_fixes_the_recorded_date(monkeypatch):
    from cann_diff.report import Invocation

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")  # 2025-12-01T00:00:00Z
    assert Invocation.now("cann-diff a b").date == "2025-12-01T00:00:00+00:00"
