"""Non-compute time through compare → findings → report: tasks, skew, host-bound Free.

Crafted traces (the builders of test_hccl_tasks.py and test_host_time.py) with the right
answers worked out in the comments; the real 910A → 910B pair at the end, whose figures
were computed separately from the trace with ``json`` (the issue's measurements).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_hccl_tasks as tasks
import test_host_time as host
from conftest import REALDATA, needs_realdata

from cann_diff.findings.story import growth_kind
from cann_diff.pipeline import diff

MS = tasks.MS


def _pair(tmp_path: Path, base_ranks: dict[int, list[dict]], new_ranks: dict[int, list[dict]]):
    for side, ranks in (("base", base_ranks), ("new", new_ranks)):
        for rank, events in ranks.items():
            tasks.write_trace_rank(tmp_path / side, rank, events)
    return diff(tmp_path / "base", tmp_path / "new")


# ---------------------------------------------------------------- a late rank

# Two ranks, three AllReduces in one step (op i at t_i = 10 + 30 i ms). In new, rank 1
# starts every op ``late`` ms after rank 0; both wait until t_i+10.2 and copy until
# t_i+12. Skew per instance = late; the waiting it costs = mean over the 2 ranks of
# (last start − own start) = late / 2; per step: 3 × late / 2.
def late_events(rank: int, late_ms: float) -> list[dict]:
    events = [*tasks.metadata(planes=1), tasks.step(1, tasks.T0, tasks.T0 + 100 * MS)]
    for i in range(3):
        t = tasks.T0 + (10 + 30 * i) * MS
        start = t + (round(late_ms * MS) if rank else 0)
        events += [tasks.kernel(t - 5 * MS, t - 4 * MS),
                   tasks.hcom(f"hcom_allReduce__586_{i}_1", start, t + 12 * MS, "RING-RING"),
                   tasks.task(0, "Notify_Record", start, start + MS // 100),
                   tasks.task(0, "Notify_Wait", start + MS // 100, t + 10_200_000),
                   tasks.task(0, "Memcpy", t + 10_200_000, t + 12 * MS, 2_064_384, "HCCS")]
    return events


def test_a_rank_ten_ms_late_at_every_allreduce_is_named(tmp_path):
    result = _pair(tmp_path, {r: late_events(r, 0.0) for r in (0, 1)},
                   {r: late_events(r, 10.0) for r in (0, 1)})
    report = result.report
    new = [s for s in report.collectives_skew if s.side == "new"]
    assert len(new) == 1
    skew = new[0]
    assert (skew.comm_type, skew.instances, skew.ranks, skew.last_rank) == ("AllReduce", 3, 2, 1)
    assert skew.median_skew_us == pytest.approx(10_000.0, rel=0.02)
    assert skew.last_share == 1.0
    assert skew.cost_us == pytest.approx(15_000.0, rel=0.02)
    late = [f for f in report.findings if f.id == "late-rank"]
    assert len(late) == 1 and late[0].data["rank"] == 1
    assert "Rank 1" in late[0].title and "AllReduce" in late[0].title
    base = [s for s in report.collectives_skew if s.side == "base"]
    assert base[0].median_skew_us == 0.0 and base[0].cost_us == 0.0


def test_one_rank_says_the_skew_cannot_be_seen(tmp_path):
    result = _pair(tmp_path, {0: late_events(0, 0.0)}, {0: late_events(0, 0.0)})
    report = result.report
    assert report.collectives_skew == ()
    assert "cannot be seen from one rank" in report.skew_note
    assert not [f for f in report.findings if f.id == "late-rank"]


# ---------------------------------------------------------------- waiting on other planes

# The eight-plane op of test_hccl_tasks.py (transfer 40, wait 20, idle 39.988 ms); in new,
# plane 3 waits 0–90 ms instead of 0–50: wait = 90 − |[0,90] ∩ transfer| = 90 − 40 = 50 ms,
# busy |[0,90] ∪ [99,99.002]| = 90.002 → idle 9.998 ms. Elapsed and exposed are the same;
# the growth is waiting (+30 ms), not idle (−29.99 ms).
def longer_wait_events() -> list[dict]:
    events = tasks.eight_plane_events()
    for event in events:
        if event.get("name") == "Notify_Wait":
            event.update(tasks.span(tasks._ns(0), tasks._ns(90)))
    return events


def test_a_wait_on_another_plane_is_waiting_in_the_verdict(tmp_path):
    result = _pair(tmp_path, {0: tasks.eight_plane_events()}, {0: longer_wait_events()})
    kind, _, data = growth_kind(result.comparison)
    assert kind == "waiting" and data["source"] == "hccl_tasks"
    assert data["parts"]["wait"] == pytest.approx({"base": 20_000.0, "new": 50_000.0})
    assert data["parts"]["idle"] == pytest.approx({"base": 39_988.0, "new": 9_998.0})
    row = result.report.communication[0]
    assert row.parts_source == "hccl_tasks"
    assert row.parts["hccl_tasks"]["new"].transfer_us == pytest.approx(40_000.0)
    assert row.parts["hccl_tasks"]["base"].link_transfer_us == pytest.approx(50_000.0)


# ---------------------------------------------------------------- host-bound Free

def _host_pair(tmp_path: Path, base_events: list[dict], new_events: list[dict]):
    for side, events in (("base", base_events), ("new", new_events)):
        host.write_trace_rank(tmp_path / side, events)
    return diff(tmp_path / "base", tmp_path / "new")


def test_host_gaps_grown_by_five_ms_are_host_bound(tmp_path):
    # test_host_time.py: delaying op C and its launch by 5 ms grows free and host-bound by
    # exactly 5 ms (free 4 → 9 ms, host-bound 2.5 → 7.5 ms).
    result = _host_pair(tmp_path, host.host_bound_events(0.0), host.host_bound_events(5.0))
    free = result.report.free
    assert free is not None and free.host_bound
    assert (free.base.free_us, free.new.free_us) == pytest.approx((4_000.0, 9_000.0))
    assert (free.base.host_bound_us, free.new.host_bound_us) == pytest.approx((2_500.0, 7_500.0))
    assert free.host_bound_share == pytest.approx(1.0)
    found = [f for f in result.report.findings if f.id == "host-bound"]
    assert len(found) == 1 and found[0].data["host_bound_delta_us"] == pytest.approx(5_000.0)
    assert "waiting for the host's launches" in result.report.headline


def test_a_gap_after_an_early_launch_is_not_host_bound(tmp_path):
    # k3 starts 5 ms later but is launched at 8.0 ms as before: the gap 5.5 → 14 ms holds
    # host-bound [5.5, 8] = 2.5 ms on both sides; free grows 4 → 9 ms all as other.
    moved = [*host.META, host.host_op("ProfilerStep#1", 0, 20),
             host.host_op(host.DATALOADER, 0, 2),
             host.host_op("aten::add", 2.0, 2.5),
             *host.launched("aclnnAdd_AddAiCore_Add", 2.1, 3, 4),
             host.host_op("aten::add", 2.6, 3.0),
             *host.launched("aclnnAdd_AddAiCore_Add", 2.7, 4.5, 5.5),
             host.host_op("aten::add", 7.9, 8.5),
             *host.launched("aclnnAdd_AddAiCore_Add", 8.0, 14, 15)]
    result = _host_pair(tmp_path, host.host_bound_events(0.0), moved)
    free = result.report.free
    assert free is not None and not free.host_bound
    assert free.new.free_us - free.base.free_us == pytest.approx(5_000.0)
    assert free.new.host_bound_us - free.base.host_bound_us == pytest.approx(0.0, abs=1e-6)
    assert not [f for f in result.report.findings if f.id == "host-bound"]


# ---------------------------------------------------------------- the real pair

PAIR = "Ascend__msinsight@c1e639ee2/test/data/pytorch/{}", "Ascend__msinsight/test/data/pytorch/{}"


@needs_realdata
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["text/level1", "db/level1"])
def test_real_pair_says_waiting_transfer_grew_algorithm_and_host(kind, tmp_path):
    base, new = (REALDATA / p.format(kind) for p in PAIR)
    result = diff(base, new)
    report = result.report
    headline = report.headline
    assert "waiting for a peer grew" in headline and "(HCCL tasks, every plane)" in headline
    assert "algorithm RING-RING → MESH-RING" in headline
    assert "with_stack false → true" in headline
    row = next(c for c in report.communication if c.comm_type == "AllReduce")
    tasks_new = row.parts["hccl_tasks"]["new"]
    assert tasks_new.wait_us >= 75_000.0  # 78.8 ms on rank 0, 73.2 on rank 1 (text)
    link = [row.parts["hccl_tasks"][s].link_transfer_us for s in ("base", "new")]
    assert link[1] > 2 * link[0]  # transfer grew (8.83 → 27.32 ms on rank 0, text)
    assert {s.side for s in report.collectives_skew} == {"base", "new"}
    assert all(s.ranks == 2 for s in report.collectives_skew)
    assert report.free is not None and report.free.host_bound
    assert report.free.settings == ("with_stack false → true",)
    ids = {f.id for f in report.findings}
    assert "host-bound" in ids


@needs_realdata
@pytest.mark.slow
def test_real_text_pair_figures_agree_with_the_trace():
    """Rank 0 of the text pair, against figures computed with json alone (the issue's)."""
    base, new = (REALDATA / p.format("text/level1") for p in PAIR)
    run = diff(base, new).comparison
    for r, side in ((run.base, 8_826.8), (run.new, 27_315.7)):
        rank0 = r.collectives[r.collectives["rank"] == 0]
        assert rank0["link_busy_us"].sum() == pytest.approx(side, rel=0.01)
    new0 = run.new.collectives[(run.new.collectives["rank"] == 0)
                               & (run.new.collectives["seq"] == 0)]
    assert float(new0["critical_wait_us"].iloc[0]) == pytest.approx(78_760.0, rel=0.01)
    assert run.host.delta("free_us") == pytest.approx(19_650.0, rel=0.01)


def test_report_json_carries_the_new_keys(tmp_path):
    result = _pair(tmp_path, {r: late_events(r, 0.0) for r in (0, 1)},
                   {r: late_events(r, 10.0) for r in (0, 1)})
    data = json.loads(json.dumps(result.report.to_dict()))
    assert set(data["communication"][0]["parts"]) == {"hccl_tasks"}
    assert data["communication"][0]["base_algorithm"] == "RING-RING"
    assert [s["side"] for s in data["collectives_skew"]] == ["base", "new"]
    assert "step_lanes" not in data
