"""Communication groups paired by what they are, and idle time (compare/communication.py).

A group's hash (``…@<hash>`` in communication.json) is a fresh number in every
collection, so two runs of one job share no hash. Real pairs, read by hand from the raw
communication.json files:

* MI level1 vs level2 (one run collected twice, 2 ranks): one world group per run,
  ``17522688603477080586`` and ``11022204950826225271``, 4 AllReduce per step on ranks 0
  and 1 — the same group by its members;
* st/level2 rank_0 vs rank_2 (two pipeline stages of one 4-rank job): 4 hashes on both
  ranks; rank 0's ``5862276114690318097`` and rank 2's ``5862276123280252691`` both hold
  2 ReduceScatter + 2 AllGather moving 1127.447 and 1127.450 MB per step (SDMA + RDMA;
  equal to 3 significant digits: the dp_cp group of each stage);
  rank 2's ``3985310396883821534`` (6 AllReduce) and ``5862276106100383503`` (2) have no
  counterpart on rank 0;
* the 2024 twin of MI level1 rank 0 vs the 2025 rank 0: ``14972622761537322538`` ↔
  ``17522688603477080586``, both on rank 0 only.

Idle: elapse = transit + wait + idle per op; the expected figures are the raw files'
``Idle Time(ms)`` summed by hand (× 1000, over the ranks and steps that carry them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA, REALDATA, needs_realdata
from profiles import Comm, Kernel, write_profile

from cann_diff.compare import compare
from cann_diff.compare.communication import compare_communication, compare_groups
from cann_diff.compare.non_compute import collective_parts
from cann_diff.match import match
from cann_diff.read import load_run

MI = REALDATA / "Ascend__msinsight/test/data/pytorch/text"
ST = REALDATA / "Ascend__msinsight/test/st/level2"
TWIN_2024 = DATA / "cross_stack/qianxiaoxixixi__MsInsightForEveryOne/test/data/pytorch/text/level1"
MI_2025_RANK0 = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"


def _raw_ops(run_dir: Path) -> list[tuple[int, str, str, dict]]:
    """(rank, op name, group, Communication Time Info) of every op under ``run_dir``."""
    ops = []
    for path in sorted(run_dir.rglob("communication.json")):
        rank_dir = path.parent.parent.name  # rank0_ascend_pt / rank_2_ascend_pt
        rank = int("".join(c for c in rank_dir.split("_ascend")[0] if c.isdigit()))
        for kinds in json.loads(path.read_text("utf-8")).values():
            for ops_of_kind in kinds.values():
                for key, info in ops_of_kind.items():
                    if key.startswith("Total Op Info"):
                        continue
                    name, _, group = key.partition("@")
                    ops.append((rank, name, group, info["Communication Time Info"]))
    return ops


def _pairs(table) -> set[tuple]:
    return {(b if isinstance(b, str) else None, n if isinstance(n, str) else None, p
             if isinstance(p, str) else None)
            for b, n, p in zip(table["base_group"], table["new_group"], table["paired_by"])}


# ------------------------------------------------------------------- real pairs


@pytest.mark.slow
@needs_realdata
def test_mi_level1_vs_level2_pairs_its_one_group_by_members():
    groups = {run: {g for _, _, g, _ in _raw_ops(MI / run)} for run in ("level1", "level2")}
    assert groups == {"level1": {"17522688603477080586"}, "level2": {"11022204950826225271"}}
    table, notes = compare_groups(load_run(MI / "level1"), load_run(MI / "level2"))
    assert _pairs(table) == {("17522688603477080586", "11022204950826225271", "ranks")}
    row = table.iloc[0]
    assert (row["base_members"], row["new_members"]) == ("0,1", "0,1")
    assert (row["base_ops"], row["new_ops"]) == (4, 4)
    assert [n.code for n in notes] == ["groups-paired"]
    assert "1 by ranks" in notes[0].text


@pytest.mark.slow
@needs_realdata
def test_st_rank0_vs_rank2_pairs_every_group_both_stages_have():
    base_ops, new_ops = _raw_ops(ST / "rank_0_ascend_pt"), _raw_ops(ST / "rank_2_ascend_pt")
    shared = {g for _, _, g, _ in base_ops} & {g for _, _, g, _ in new_ops}
    assert shared == {"3985310379703952346", "3985310405473756128", "3985310491373102170",
                      "5862276093215481612"}
    twins = ("5862276114690318097", "5862276123280252691")
    for ops, twin in ((base_ops, twins[0]), (new_ops, twins[1])):
        kinds = sorted(name.split("__")[0] for _, name, g, _ in ops if g == twin)
        assert kinds == ["hcom_allGather"] * 2 + ["hcom_reduceScatter"] * 2
    sizes = []
    for path, twin in ((ST / "rank_0_ascend_pt", twins[0]), (ST / "rank_2_ascend_pt", twins[1])):
        data = json.loads((path / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
        ops = [v for kinds in data.values() for of_kind in kinds.values()
               for k, v in of_kind.items() if k.endswith("@" + twin)]
        sizes.append(sum(op["Communication Bandwidth Info"][link]["Transit Size(MB)"]
                         for op in ops for link in ("SDMA", "RDMA")))
    assert sizes == pytest.approx([1127.44704, 1127.450112]) and sizes[0] != sizes[1]
    table, _ = compare_groups(load_run(ST / "rank_0_ascend_pt"),
                              load_run(ST / "rank_2_ascend_pt"))
    assert _pairs(table) == {*((g, g, "name") for g in shared), (*twins, "signature"),
                             (None, "3985310396883821534", None),
                             (None, "5862276106100383503", None)}
    twin_row = table[table["base_group"] == twins[0]].iloc[0]
    assert twin_row["base_collectives"] == twin_row["new_collectives"] == \
        "AllGather×2,ReduceScatter×2"


def test_cross_stack_world_group_pairs_by_members():
    groups = [{g for _, _, g, _ in _raw_ops(d)} for d in (TWIN_2024, MI_2025_RANK0)]
    assert groups == [{"14972622761537322538"}, {"17522688603477080586"}]
    table, _ = compare_groups(load_run(TWIN_2024), load_run(MI_2025_RANK0))
    assert _pairs(table) == {("14972622761537322538", "17522688603477080586", "ranks")}


@pytest.mark.slow
@needs_realdata
def test_members_are_compared_over_the_ranks_both_runs_read():
    # The 2024 twin has rank 0 only; MI level1 has ranks 0 and 1: on rank 0 both record
    # one world group, so it pairs although the runs read different rank sets.
    table, _ = compare_groups(load_run(TWIN_2024), load_run(MI / "level1"))
    assert _pairs(table) == {("14972622761537322538", "17522688603477080586", "ranks")}
    assert (table.iloc[0]["base_members"], table.iloc[0]["new_members"]) == ("0", "0,1")


@needs_realdata
def test_a_run_against_itself_pairs_by_name_and_needs_no_note():
    run = load_run(ST / "rank_2_ascend_pt")
    table, notes = compare_groups(run, run)
    assert set(table["paired_by"]) == {"name"} and len(table) == 7 and notes == []


# ------------------------------------------------------------------- idle time


def _hand_sum(ops, field: str, units: int, *, group: str | None = None,
              kind: str | None = None) -> float:
    return sum(info[field] for _, name, g, info in ops
               if (group is None or g == group) and (kind is None or kind in name)) \
        * 1000.0 / units


@pytest.mark.slow
@needs_realdata
def test_idle_per_type_and_group_equals_the_raw_sums_mi():
    """communication.json's figures per type are its raw sums; the group, whose HCCL tasks
    both runs hold, takes transit, wait and idle from the tasks (one source), as the
    collectives' split per type does, and keeps communication.json's elapse."""
    base, new = load_run(MI / "level1"), load_run(MI / "level2")
    raw = {"base": _raw_ops(MI / "level1"), "new": _raw_ops(MI / "level2")}
    by_type = compare_communication(base, new).set_index("comm_type").loc["AllReduce"]
    groups, _ = compare_groups(base, new)
    tasks = {"base": collective_parts(base).loc["AllReduce"],
             "new": collective_parts(new).loc["AllReduce"]}
    for side in ("base", "new"):  # 2 ranks × 1 step carry the AllReduce ops
        assert groups.iloc[0][f"{side}_parts_source"] == "hccl_tasks"
        for field, column in (("Idle Time(ms)", "idle_us"), ("Transit Time(ms)", "transit_us"),
                              ("Wait Time(ms)", "wait_us"), ("Elapse Time(ms)", "elapse_us")):
            expected = _hand_sum(raw[side], field, 2, kind="allReduce")
            assert by_type[f"{side}_{column}"] == pytest.approx(expected, rel=1e-9)
        for column, task in (("idle_us", "idle_us"), ("transit_us", "transfer_us"),
                             ("wait_us", "wait_us")):
            assert groups.iloc[0][f"{side}_{column}"] == pytest.approx(tasks[side][task],
                                                                      rel=1e-9)
        assert groups.iloc[0][f"{side}_elapse_us"] == pytest.approx(
            _hand_sum(raw[side], "Elapse Time(ms)", 2, kind="allReduce"), rel=1e-9)
        parts = by_type[f"{side}_transit_us"] + by_type[f"{side}_wait_us"] + \
            by_type[f"{side}_idle_us"]
        assert parts == pytest.approx(by_type[f"{side}_elapse_us"], rel=1e-9)


@pytest.mark.slow
@needs_realdata
def test_idle_per_group_equals_the_raw_sums_st():
    raw = {"base": _raw_ops(ST / "rank_0_ascend_pt"), "new": _raw_ops(ST / "rank_2_ascend_pt")}
    table, _ = compare_groups(load_run(ST / "rank_0_ascend_pt"),
                              load_run(ST / "rank_2_ascend_pt"))
    for row in table.itertuples():
        for side in ("base", "new"):
            group = getattr(row, f"{side}_group")
            if not isinstance(group, str):
                continue  # one rank, one step: a unit is the whole file
            assert getattr(row, f"{side}_idle_us") == pytest.approx(
                _hand_sum(raw[side], "Idle Time(ms)", 1, group=group), rel=1e-9, abs=1e-9)


def test_idle_of_the_cross_stack_pair():
    # 2024: 0.8247782499999445 + 0.6635264999999988 + 1.3800842499999986 +
    # 0.10007074999999976 ms = 2.96845975 ms of idle in the 4 AllReduce of step 50.
    table = compare_communication(load_run(TWIN_2024), load_run(MI_2025_RANK0))
    row = table.set_index("comm_type").loc["AllReduce"]
    assert row["base_idle_us"] == pytest.approx(2968.45975, abs=1e-6)
    assert row["new_idle_us"] == pytest.approx(_hand_sum(_raw_ops(MI_2025_RANK0),
                                                         "Idle Time(ms)", 1), rel=1e-9)


# ------------------------------------------------------------------- crafted runs


def _two_rank_run(root: Path, label: str, groups: dict[int, list[tuple[str, str]]]):
    """Ranks 0 and 1; ``groups[rank]`` is the (kind, hash) of each collective it runs."""
    def schedule(rank, step):
        ops = [Kernel("aclnnMul_Mul_Mul", "Mul", "AI_CORE", 50.0, "64,64;64,64")]
        return ops + [Comm(kind, 300.0, group=g) for kind, g in groups[rank]]
    return load_run(write_profile(root, label, schedule, ranks=(0, 1), steps=(1, 2)).path)


def test_groups_pair_by_members_and_a_shared_key_pairs_none(tmp_path):
    # base: world 111 (ranks 0, 1; AllReduce) and 222 (rank 0; AllGather), 555 and 556
    # (rank 1; one Broadcast each: same members, same collectives, so neither pairs);
    # new: the same with hashes 333, 444, 557, 558.
    base = _two_rank_run(tmp_path, "base", {
        0: [("allReduce", "111"), ("allGather", "222")],
        1: [("allReduce", "111"), ("broadcast", "555"), ("broadcast", "556")]})
    new = _two_rank_run(tmp_path, "new", {
        0: [("allReduce", "333"), ("allGather", "444")],
        1: [("allReduce", "333"), ("broadcast", "557"), ("broadcast", "558")]})
    table, notes = compare_groups(base, new)
    assert _pairs(table) == {("111", "333", "ranks"), ("222", "444", "ranks"),
                             ("555", None, None), ("556", None, None),
                             (None, "557", None), (None, "558", None)}
    assert "2 by ranks; 2 only in base, 2 only in new" in notes[0].text
    # profiles.py splits an op's 300 µs as transit 60 %, wait 30 %, idle the rest.
    world = table[table["base_group"] == "111"].iloc[0]
    assert world["base_idle_us"] == pytest.approx(30.0)
    assert world["base_transit_us"] + world["base_wait_us"] + world["base_idle_us"] == \
        pytest.approx(world["base_elapse_us"]) == pytest.approx(300.0)
    assert (world["base_group"], world["new_group"], world["group"]) == ("111", "333", "111")


@pytest.mark.slow
def test_compare_adds_the_pairing_note_to_the_warnings(tmp_path):
    base = _two_rank_run(tmp_path, "base", {0: [("allReduce", "111")],
                                            1: [("allReduce", "111")]})
    new = _two_rank_run(tmp_path, "new", {0: [("allReduce", "999")],
                                          1: [("allReduce", "999")]})
    comparison = compare(base, new, match(base.summary.ops, new.summary.ops))
    assert [n.code for n in comparison.warnings if n.code == "groups-paired"] == \
        ["groups-paired"]
    assert comparison.groups[["base_group", "new_group", "paired_by"]].values.tolist() == \
        [["111", "999", "ranks"]]
