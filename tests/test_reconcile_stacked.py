"""``reconcile_stacked`` gives every rank of a stack what ``reconcile_steps`` gives it alone.

The per-rank form cost ~3 ms of pandas a rank (10,000 small ranks: 64 s of 160 s of CPU);
the stacked one does the same join once. Random stacks: ranks without profiler figures,
empty ones, steps the kernels cover (within 1 %) and steps they do not, steps missing on
either side, missing (<NA>) step ids, a rank whose kernels lie elsewhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cann_diff.read.reduce.timeline import (
    LEDGER_FIELDS,
    reconcile_stacked,
    reconcile_steps,
)

FIELDS = (*LEDGER_FIELDS, "preparing")


def profiler_frame(rng, steps) -> pd.DataFrame:
    frame = pd.DataFrame({name: rng.uniform(100, 1000, len(steps)) for name in FIELDS})
    frame.insert(0, "step", pd.array(steps, dtype="Int64"))
    frame["stage"] = frame["computing"] * 3  # room for a covering ledger
    frame["bubble"] = 0.0
    return frame


def ledger_of(rng, profiler: pd.DataFrame, covered: np.ndarray) -> pd.DataFrame:
    """Kernel figures: within 1 % of the profiler's span and computing where ``covered``."""
    ledger = profiler.copy()
    for name in LEDGER_FIELDS:
        ledger[name] = ledger[name] * (1 + rng.uniform(-0.004, 0.004, len(ledger)))
    ledger.loc[~covered, "computing"] *= 1.5  # off by 50 %: not this step
    ledger["preparing"] = np.nan
    return ledger


def stack(seed: int):
    rng = np.random.default_rng(seed)
    profilers, ledgers = [], []
    for rank in range(int(rng.integers(1, 9))):
        kind = rng.integers(0, 6)
        if kind == 0:
            profilers.append(None)
            continue
        steps = list(rng.choice(np.arange(1, 9), size=int(rng.integers(0, 5)), replace=False))
        if kind == 1 and steps:
            steps[0] = None  # a step id the file lacks
        profiler = profiler_frame(rng, steps)
        profilers.append(profiler)
        if kind == 2 or not len(profiler):
            continue  # no kernel rows for this rank
        ledger = ledger_of(rng, profiler, rng.uniform(size=len(profiler)) < 0.7)
        if kind == 3:
            ledger = ledger.iloc[: len(ledger) // 2]  # kernels in some steps only
        ledgers.append(ledger.assign(rank=rank))
    ledger = pd.concat(ledgers, ignore_index=True) if ledgers else None
    return profilers, ledger


def alone(profilers, ledger):
    """Each rank through ``reconcile_steps`` with its own rows of the ledger, as before."""
    out = []
    for n, profiler in enumerate(profilers):
        mine = None if ledger is None else ledger[ledger["rank"] == n]
        mine = None if mine is None or not len(mine) else mine.assign(rank=0)
        out.append(reconcile_steps(profiler, mine))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_stacked_equals_one_rank_at_a_time(seed):
    profilers, ledger = stack(seed)
    want, got = alone(profilers, ledger), reconcile_stacked(profilers, ledger)
    assert len(got) == len(want)
    for (frame, differ), (expected, expected_differ) in zip(got, want):
        if expected is None:
            assert frame is None
        else:
            pd.testing.assert_frame_equal(frame.reset_index(drop=True),
                                          expected.reset_index(drop=True))
        assert differ.keys() == expected_differ.keys()
        for name, value in expected_differ.items():
            assert differ[name] == pytest.approx(value, rel=1e-12)


def test_a_covered_step_takes_the_kernels_figures_by_hand():
    profiler = pd.DataFrame({"step": pd.array([1, 2], dtype="Int64"),
                             **{name: [1000.0, 1000.0] for name in FIELDS}})
    profiler["bubble"] = 0.0
    kernels = profiler.assign(rank=0).copy()
    kernels.loc[0, "computing"] = 995.0  # within 1 % of 1,000: the kernels cover step 1
    kernels.loc[1, "computing"] = 900.0  # 10 % off: step 2 keeps the profiler's figures
    kernels["free"] = [7.0, 7.0]
    [(frame, differ)] = reconcile_stacked([profiler], kernels)
    assert frame["computing"].tolist() == [995.0, 1000.0]
    assert frame["free"].tolist() == [7.0, 1000.0]
    assert differ == {"computing": 5.0, "free": 993.0}
