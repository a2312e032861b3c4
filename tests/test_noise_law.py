"""Noise never speaks: findings are about change, and no profiled rank is blamed for peers
no one profiled (docs/design.md "Self comparison", "Finding ids").

The law, as tests:

* real A/A and control pairs (each real run against itself, text and db; Level1 vs Level2
  of one collection; text vs db of the 2025 stack; the 4-rank job): no finding above
  ``info`` and none about a rank;
* generated noisy A/A pairs at 20 seeds (2-rank jobs with HCCL tasks whose ranks pause
  at random before collectives; 4-stage pipeline jobs whose last stage holds the LM head
  on both sides): none about a rank, and pairs with any finding above ``info`` at most
  ``alpha`` of all. Before this law the same generators raised a finding about a rank in
  5 of 10 job pairs (``late-rank``) and 10 of 10 pipeline pairs (``slow-rank``);
* ``late-rank`` and ``slow-rank`` fire on a change, with figures worked out by hand; an
  imbalance of both runs is described as "in both runs";
* the real pair's AllReduce group: its tasks name 8 ranks (2025) and 3 (2024, a ring)
  while 2 were profiled; the figures are computed here from the files with ``json`` and
  ``sqlite3``, never with the code under test.
"""

from __future__ import annotations

import json
import random
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import test_hccl_tasks as tasks
from conftest import REALDATA, needs_realdata
from profiles import Comm, aclnn, write_profile

from cann_diff.findings.late_rank import late_in_both, paired_groups, unprofiled_peers
from cann_diff.findings.slow_rank import imbalances_in_both
from cann_diff.pipeline import diff
from cann_diff.read import load_run
from cann_diff.read.reduce import collectives
from cann_diff.settings import Thresholds

MS = tasks.MS
ALPHA = Thresholds().alpha
ABOUT_A_RANK = ("late-rank", "slow-rank")
PYTORCH = "test/data/pytorch"
NEW = REALDATA / "Ascend__msinsight" / PYTORCH  # 2025, Ascend910B
OLD = REALDATA / "Ascend__msinsight@c1e639ee2" / PYTORCH  # 2024, Ascend910A
ST = REALDATA / "Ascend__msinsight" / "test" / "st" / "level2"  # 4 ranks, no HCCL tasks


def loud(findings) -> list[str]:
    """The findings the law forbids on noise: above info, or about a rank."""
    return [f"{f.severity} {f.id}: {f.title}" for f in findings
            if f.severity != "info" or f.id in ABOUT_A_RANK or "rank" in f.data]


# ---------------------------------------------------------------- real A/A and controls

SELF = [(OLD / kind / level, OLD / kind / level) for kind in ("text", "db")
        for level in ("level0", "level1")] + \
       [(NEW / kind / level, NEW / kind / level) for kind in ("text", "db")
        for level in ("level0", "level1", "level2")] + [(ST, ST)]
CONTROLS = [(NEW / kind / "level1", NEW / kind / "level2") for kind in ("text", "db")] + \
           [(NEW / "text" / level, NEW / "db" / level) for level in ("level0", "level1", "level2")]


def _name(pair) -> str:
    base, new = pair
    return f"{base.relative_to(REALDATA)} vs {new.relative_to(REALDATA)}"


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("pair", SELF + CONTROLS, ids=_name)
def test_noise_among_real_runs_raises_nothing(pair):
    analysis = diff(*pair).analysis
    assert loud(analysis.findings) == []
    if pair[0] == pair[1]:  # a run against itself: its verdict names no cause either
        assert analysis.verdict is not None and analysis.verdict.causes == ()


# ---------------------------------------------------------------- generated jobs with tasks

KERNELS = ("aclnnAdd_AddAiCore_Add", "aclnnMul_MulAiCore_Mul", "aclnnSub_SubAiCore_Sub")


def ranked(plane: int, kind: str, start: int, end: int, src: int, dst: int, size: int = 0,
           link: str = "INVALID_TYPE") -> dict:
    """A plane task between ``src`` and ``dst`` (test_hccl_tasks.task names ranks 0 and 1)."""
    event = tasks.task(plane, kind, start, end, size, link)
    event["args"].update({"src rank": src, "dst rank": dst})
    return event


def write_job(root: Path, label: str, seed: int, *, ranks: int = 2, steps: int = 4,
              per_step: int = 3, noise: float = 0.0, late: int | None = None,
              late_ms: float = 0.0, pause_ms: float = 0.0) -> Path:
    """Trace-only ranks of a data-parallel job: per collective, three kernels of 0.7 ms
    (times a lognormal factor ``exp(N(0, noise))``) 0.02 ms apart, then an AllReduce. A
    rank starts it when its kernels end, plus ``late_ms`` for rank ``late`` and, with
    probability 0.1, a host pause of ``pause_ms``. Every rank's op: a record to each peer
    (0.01 ms), a wait until 0.2 ms after the last arrival, a 1 ms copy (times the noise
    factor) over HCCS; the next kernel 0.05 ms after. Steps span all ranks' work.
    """
    rng = random.Random(seed)

    def factor() -> float:
        return rng.lognormvariate(0.0, noise) if noise else 1.0

    events = {r: [*tasks.metadata(planes=1)] for r in range(ranks)}
    t, index = tasks.T0, 0
    for step in range(1, steps + 1):
        clock = [t] * ranks
        for _ in range(per_step):
            arrive = []
            for r in range(ranks):
                for name in KERNELS:
                    dur = round(0.7 * MS * factor())
                    events[r].append(tasks.kernel(clock[r], clock[r] + dur, name))
                    clock[r] += dur + MS // 50
                pause = round(pause_ms * MS) if pause_ms and rng.random() < 0.1 else 0
                arrive.append(clock[r] + pause + (round(late_ms * MS) if r == late else 0))
            ready = max(arrive) + MS // 5
            done = ready + round(MS * factor())
            for r in range(ranks):
                peers = [p for p in range(ranks) if p != r]
                events[r] += [tasks.hcom(f"hcom_allReduce__586_{index}_1", arrive[r], done),
                              *(ranked(0, "Notify_Record", arrive[r], arrive[r] + MS // 100,
                                       r, p) for p in peers),
                              ranked(0, "Notify_Wait", arrive[r] + MS // 100, ready, r,
                                     peers[0]),
                              ranked(0, "Memcpy", ready, done, r, peers[-1], 1 << 20, "HCCS")]
                clock[r] = done + MS // 20
            index += 1
        end = max(clock)
        for r in range(ranks):
            events[r].append(tasks.step(step, t, end))
        t = end + MS
    for r in range(ranks):
        tasks.write_trace_rank(root / label, r, events[r])
    return root / label


# ---------------------------------------------------------------- pipeline jobs (profiles.py)

def pipeline(head_us: float = 600.0, head_new_us: float | None = None):
    """A 4-stage pipeline: every stage runs MatMul 1000 µs, FA 800 µs and an AllReduce
    300 µs per step; the last stage (rank 3) also the LM head, a MatMul of ``head_us``."""
    def ops(rank, step):
        body = [aclnn("MatMulV3", 1000.0, "4096,4096;4096,4096"),
                aclnn("FlashAttentionScore", 800.0, "1,16,4096,128", core="MIX_AIC")]
        if rank == 3:
            body.append(aclnn("MatMulV3", head_us, "4096,4096;4096,32000"))
        return [*body, Comm("allReduce", 300.0)]
    return ops


STAGES = (0, 1, 2, 3)
STEPS = (1, 2, 3, 4)


def computing_per_rank(built) -> pd.Series:
    """Computing per step, mean per rank, from kernel_details.csv with pandas: the sum of
    the compute kernels' durations (they never overlap here: the schedule runs them one
    after another, 2 µs apart)."""
    def one(rank: int) -> float:
        folder = next(Path(built).glob(f"node0_{4000 + rank}_*"))
        rows = pd.read_csv(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
        compute = rows[rows["Accelerator Core"] != "HCCL"]
        return float(compute.groupby("Step Id")["Duration(us)"].sum().mean())
    return pd.Series({rank: one(rank) for rank in STAGES})


@pytest.mark.slow
def test_noisy_a_a_pairs_at_20_seeds_raise_nothing_about_a_rank(tmp_path):
    alarms, about_rank = [], []
    for seed in range(20):
        pairs = [(write_job(tmp_path, f"job{seed}b", 2 * seed, noise=0.05, pause_ms=2.0),
                  write_job(tmp_path, f"job{seed}n", 2 * seed + 1, noise=0.05, pause_ms=2.0)),
                 (write_profile(tmp_path, f"pipe{seed}b", pipeline(), ranks=STAGES, steps=STEPS,
                                noise=0.05, seed=2 * seed),
                  write_profile(tmp_path, f"pipe{seed}n", pipeline(), ranks=STAGES, steps=STEPS,
                                noise=0.05, seed=2 * seed + 1))]
        for base, new in pairs:
            findings = diff(base, new).analysis.findings
            about_rank += [f"{seed}: {f.id}" for f in findings if "rank" in f.data]
            if any(f.severity != "info" for f in findings):
                alarms.append(seed)
    assert about_rank == []
    assert len(alarms) <= ALPHA * 40, alarms


# ---------------------------------------------------------------- late-rank fires on a change

# Four ranks without noise: every rank's kernels end together, so in base all arrive at
# once (skew 0, cost 0). In new rank 2 arrives 1 ms late at each of the 12
# AllReduces (3 a step, 4 steps): skew 1 ms; the waiting an instance costs is the mean over
# the 4 ranks of (last start − own start) = (3 × 1 + 0) / 4 = 0.75 ms, 2.25 ms per step,
# all of it rank 2's. Its lateness is 1 ms in 12 instances against 0 in 12: Mann-Whitney
# p ≈ 2e-6, far under alpha.
@pytest.mark.slow
def test_a_rank_whose_lateness_grows_is_named(tmp_path):
    base = write_job(tmp_path, "base", 0, ranks=4)
    new = write_job(tmp_path, "new", 1, ranks=4, late=2, late_ms=1.0)
    result = diff(base, new)
    late = [f for f in result.analysis.findings if f.id == "late-rank"]
    assert len(late) == 1 and late[0].severity == "medium"
    data = late[0].data
    assert data["rank"] == 2 and data["tested"] and data["p_value"] < ALPHA
    assert data["last_cost_us"] == pytest.approx(2_250.0, abs=1.0)
    assert data["base_last_cost_us"] == pytest.approx(0.0, abs=1.0)
    assert late[0].delta_us == pytest.approx(2_250.0, abs=1.0)
    assert not [f for f in result.analysis.findings if f.id == "slow-rank"]


@pytest.mark.slow
def test_a_rank_late_in_both_runs_is_described_not_raised(tmp_path):
    base = write_job(tmp_path, "base", 0, ranks=4, late=2, late_ms=1.0)
    new = write_job(tmp_path, "new", 1, ranks=4, late=2, late_ms=1.0)
    result = diff(base, new)
    assert loud(result.analysis.findings) == []
    notes = late_in_both(result.comparison)
    assert [(n.code, n.data["rank"]) for n in notes] == [("late-in-both", 2)]
    assert notes[0].data["base_cost_us"] == pytest.approx(2_250.0, abs=1.0)
    assert notes[0].data["new_cost_us"] == pytest.approx(2_250.0, abs=1.0)
    assert "in both runs" in notes[0].text


def test_groups_of_two_captures_pair_by_type():
    """A group id is fresh in every collection: one AllGather group a side pairs by type,
    the AllReduce by its id; a type with two new groups and one base group stays alone."""
    def row(side, comm_type, group, last_rank):
        return {"side": side, "comm_type": comm_type, "group": group, "last_rank": last_rank}
    skew = pd.DataFrame([row("base", "AllGather", "hash-a", 0),
                         row("new", "AllGather", "hash-b", 1),
                         row("base", "AllReduce", "g", 1), row("new", "AllReduce", "g", 0),
                         row("base", "Broadcast", "x", 0), row("new", "Broadcast", "y", 0),
                         row("new", "Broadcast", "z", 0)])
    paired = paired_groups(skew).set_index(["comm_type", "group"])
    assert paired.loc[("AllGather", "hash-b"), "base_group"] == "hash-a"
    assert paired.loc[("AllGather", "hash-b"), "base_last_rank"] == 0
    assert paired.loc[("AllReduce", "g"), "base_group"] == "g"
    assert paired.loc[[("Broadcast", "y"), ("Broadcast", "z")], "base_group"].isna().all()


# ---------------------------------------------------------------- slow-rank fires on a change

@pytest.mark.slow
def test_a_pipeline_imbalance_of_both_runs_is_described_not_raised(tmp_path):
    base = write_profile(tmp_path, "base", pipeline(), ranks=STAGES, steps=STEPS, noise=0.02,
                         seed=1)
    new = write_profile(tmp_path, "new", pipeline(), ranks=STAGES, steps=STEPS, noise=0.02,
                        seed=2)
    result = diff(base, new)
    assert loud(result.analysis.findings) == []
    notes = {n.data["metric"]: n for n in imbalances_in_both(result.comparison)
             if n.data["rank"] == 3}
    assert "computing" in notes and all(n.data["rank"] == 3
                                        for n in imbalances_in_both(result.comparison))
    for side, built in (("base", base), ("new", new)):
        computing = computing_per_rank(built)
        data = notes["computing"].data
        assert data[f"{side}_value_us"] == pytest.approx(computing[3], rel=1e-6)
        assert data[f"{side}_median_us"] == pytest.approx(computing.median(), rel=1e-6)
    assert "in both runs" in notes["computing"].text


@pytest.mark.slow
def test_a_stage_whose_lm_head_grows_is_a_slow_rank(tmp_path):
    """The LM head grows 600 → 900 µs: rank 3's computing excess over the median grows by
    about 300 µs (from the builder's figures), well above 5 % of the median."""
    base = write_profile(tmp_path, "base", pipeline(600.0), ranks=STAGES, steps=STEPS,
                         noise=0.02, seed=1)
    new = write_profile(tmp_path, "new", pipeline(900.0), ranks=STAGES, steps=STEPS,
                        noise=0.02, seed=2)
    slow = [f for f in diff(base, new).analysis.findings if f.id == "slow-rank"]
    computing = [f for f in slow if f.data["metric"] == "computing"]
    assert {f.data["rank"] for f in slow} == {3} and len(computing) == 1
    b, n = computing_per_rank(base), computing_per_rank(new)
    grown = (n[3] - n.median()) - (b[3] - b.median())
    assert grown == pytest.approx(300.0, rel=0.15)
    assert computing[0].data["growth_us"] == pytest.approx(grown, rel=1e-6)
    assert computing[0].data["tested"] and computing[0].data["p_value"] < ALPHA


# ---------------------------------------------------------------- group_ranks from the tasks

def _text_rank(root: Path, events: list[dict]) -> Path:
    """A text export (kernel_details.csv beside its trace), as test_hccl_tasks.py writes
    one: its plain task events are read from their bytes."""
    folder = tasks.write_trace_rank(root, 0, events)
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
    rows = [["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", tasks.us(tasks.T0),
             "500.0"],
            ["1", "hcom_allReduce__586_0_1", "hcom_allReduce_", "HCCL",
             tasks.us(tasks.OP_START), "100000.0"]]
    (folder / tasks.OUT / "kernel_details.csv").write_text(
        "\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return root


def _one_op(peers: list[int | str | None]) -> list[dict]:
    """The eight-plane op of test_hccl_tasks.py, its i-th task between rank 0 and peers[i]
    (None: no rank args at all)."""
    events = tasks.eight_plane_events()
    plane_tasks = [e for e in events if "link type" in e.get("args", {})]
    for event, peer in zip(plane_tasks, peers):
        if peer is None:
            del event["args"]["src rank"], event["args"]["dst rank"]
        else:
            event["args"]["dst rank"] = peer
    return events


# Nine tasks: peers 1, 2, 3, 4294967295 (HCCL's "no peer"), 1, 2 and three with rank 0
# itself: the op names ranks {0, 1, 2, 3} = 4.
PEERS = [1, 2, 3, 4294967295, 1, 2, 0, 0, 0]


@pytest.mark.parametrize("layout", ["text export", "trace only"])
@pytest.mark.parametrize("peers, want", [(PEERS, 4), ([None] * 9, 0), ([5] + [None] * 8, 2),
                                         (["7", *PEERS[1:]], 5)],
                         ids=["four ranks", "no rank args", "one task names two",
                              "a rank as text"])
def test_group_ranks_count_the_ranks_an_op_names(tmp_path, layout, peers, want):
    events = _one_op(peers)
    if layout == "text export":
        _text_rank(tmp_path / "run", events)
    else:
        tasks.write_trace_rank(tmp_path / "run", 0, events)
    assert load_run(tmp_path / "run").collectives["group_ranks"].tolist() == [want]


def test_group_ranks_from_a_db(tmp_path):
    """test_hccl_tasks.write_db_rank names ranks 0 and 1 on every task; three tasks are
    rewritten to peers 2, 3 and 4294967295: the op names {0, 1, 2, 3} = 4 ranks."""
    folder = tasks.write_db_rank(
        tmp_path / "db", 0, [(tasks.T0, tasks.T0 + MS // 2)],
        [("hcom_allReduce__586_0_1", tasks.OP_START, tasks.OP_START + 100 * MS, "MESH-RING")],
        [(0, p, tasks._ns(a), tasks._ns(b), kind, size, link)
         for p, kind, a, b, size, link in tasks.PLANE_TASKS], [(1, tasks.T0, tasks.T0 + 110 * MS)])
    db = next(folder.glob(f"{tasks.OUT}/*.db"))
    with sqlite3.connect(db) as conn:
        conn.executemany("UPDATE COMMUNICATION_TASK_INFO SET dstRank = ? WHERE globalTaskId = ?",
                         [(2, 2), (3, 3), (4294967295, 4)])
    assert load_run(tmp_path / "db").collectives["group_ranks"].tolist() == [4]


@pytest.mark.parametrize("cells", [1 << 26, 0], ids=["flags", "sorted pairs"])
def test_group_ranks_count_distinct_named_ranks_per_op(monkeypatch, cells):
    """Both ways of counting give pandas' count of distinct (op, rank) pairs; -1 is none."""
    monkeypatch.setattr(collectives, "SEEN_CELLS", cells)
    rng = np.random.default_rng(7)
    op, src, dst = rng.integers(0, 40, 500), rng.integers(-1, 4, 500), rng.integers(-1, 900, 500)
    named = pd.DataFrame({"op": np.r_[op, op], "rank": np.r_[src, dst]}).query("rank >= 0")
    want = named.drop_duplicates().groupby("op").size().reindex(range(45), fill_value=0)
    assert collectives._group_ranks(op, src, dst, 45).tolist() == want.tolist()


# ---------------------------------------------------------------- the real pair's group

def _ns(ts) -> int:
    return int(Decimal(str(ts)) * 1000)


def _trace_ops(trace: Path) -> list[dict]:
    """Per hcom op of a rank's trace (by start): its start, the start of its first
    data-moving task over a link, and the distinct ranks its tasks name."""
    events = json.loads(trace.read_text())
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    hccl = {pid for pid, name in names.items() if name in ("HCCL", "Communication")}
    ops = sorted((_ns(e["ts"]), _ns(e["ts"]) + round(e["dur"] * 1000)) for e in events
                 if e.get("ph") == "X" and e.get("pid") in hccl
                 and str(e.get("name", "")).startswith("hcom_"))
    plane = [e for e in events if e.get("ph") == "X" and e.get("pid") in hccl
             and "link type" in e.get("args", {})]
    out = []
    for start, end in ops:
        mine = [e for e in plane if start <= _ns(e["ts"]) <= end]
        ranks = {e["args"][k] for e in mine for k in ("src rank", "dst rank")} - {4294967295}
        moving = [_ns(e["ts"]) for e in mine if e["args"]["size(Byte)"] > 0
                  and e["args"]["link type"] != "ON_CHIP" and "Notify" not in e["name"]]
        out.append({"start": start, "first": min(moving), "ranks": len(ranks)})
    return out


def _db_ranks(db: Path) -> list[int]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT opId, COUNT(DISTINCT r) FROM (SELECT opId, srcRank AS r FROM "
                            "COMMUNICATION_TASK_INFO UNION SELECT opId, dstRank FROM "
                            "COMMUNICATION_TASK_INFO) WHERE r < 4294967295 GROUP BY opId "
                            "ORDER BY opId").fetchall()
    return [count for _, count in rows]


@pytest.mark.slow
@needs_realdata
def test_group_ranks_of_the_real_pair_are_what_the_files_name():
    for root, want in ((NEW, 8), (OLD, 3)):
        for rank in (0, 1):
            trace = root / "text/level1" / f"rank{rank}_ascend_pt" / tasks.OUT / "trace_view.json"
            db = next((root / "db/level1" / f"rank{rank}_ascend_pt" / tasks.OUT).glob(
                "ascend_pytorch_profiler_*.db"))
            by_json = [op["ranks"] for op in _trace_ops(trace)]
            assert by_json == _db_ranks(db) == [want] * 4
            for kind, counts in (("text", by_json), ("db", _db_ranks(db))):
                run = load_run(root / kind / "level1")
                mine = run.collectives[run.collectives["rank"] == rank].sort_values("start_ns")
                assert mine["group_ranks"].tolist() == counts


@pytest.mark.slow
@needs_realdata
def test_the_real_pair_says_the_group_is_larger_and_blames_no_profiled_rank():
    result = diff(OLD / "text/level1", NEW / "text/level1")
    cmp = result.comparison
    skew = cmp.skew.set_index("side")
    # new: every task names ranks 0-7 (8), two were profiled; base, a ring: 3 named
    assert skew.loc["new", ["group_ranks", "ranks", "unprofiled"]].tolist() == [8, 2, 6]
    assert skew.loc["base", ["group_ranks", "ranks", "unprofiled"]].tolist() == [3, 2, 1]
    # Waiting no profiled arrival explains: per instance, the mean over the two ranks of
    # (own first transfer over a link − the last profiled start), from the json: ≈ 96 ms
    # per step in new (the wait on plane 5 for rank 5, on plane 4 for it on rank 1).
    ops = [_trace_ops(NEW / "text/level1" / f"rank{r}_ascend_pt" / tasks.OUT
                      / "trace_view.json") for r in (0, 1)]
    witness = sum(max(r[k]["first"] - max(o[k]["start"] for o in ops), 0) / 2
                  for k in range(len(ops[0])) for r in ops) / 1000
    assert witness == pytest.approx(96_150.3, abs=1.0)
    assert skew.loc["new", "unseen_wait_us"] == pytest.approx(witness, rel=0.01)
    # rank 1, last of the two profiled, is not named as the one everyone waits for
    assert not [f for f in result.analysis.findings if f.id in ABOUT_A_RANK]
    assert late_in_both(cmp) == ()
    notes = {n.data["side"]: n for n in unprofiled_peers(cmp)}
    data = dict(notes["new"].data)
    assert data.pop("unseen_wait_us") == pytest.approx(witness, rel=0.01)
    assert data == {"side": "new", "comm_type": "AllReduce", "group": "Group 0",
                    "group_ranks": 8, "ranks": 2, "unprofiled": 6}
    assert "name 8 ranks" in notes["new"].text and "2 were profiled" in notes["new"].text
    assert "Rank 1" not in notes["new"].text and "rank 1" not in notes["new"].text
    assert notes["base"].data["unprofiled"] == 1
