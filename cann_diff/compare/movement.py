"""Data movement of two runs: host↔device copies and HBM bandwidth, base vs new.

Part of the memory comparison (``memory.py`` assembles it; the ``copies`` and ``hbm`` keys
of report.json's ``memory`` are documented there). Copy counts and device time come from the
``memcpy`` rows of each run's kernel summary, per (rank, step) unit; copy bytes from the
db's MEMCPY_INFO per rank; HBM bandwidth from the db's ``HBM`` table or the trace's
counters, as summed per rank where the rank was read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import COPY_DIRECTIONS, MemoryData, Note
from .operators import units_of

MIB_BYTES = float(2**20)


COPY_FIELDS = ("direction", "base_count", "new_count", "base_time_us", "new_time_us",
               "delta_time_us", "delta_pct", "base_mb", "new_mb", "delta_mb")
HBM_FIELDS = ("direction", "base_mean_gbps", "new_mean_gbps", "delta_mean_gbps",
              "delta_mean_pct", "base_peak_gbps", "new_peak_gbps", "delta_peak_gbps",
              "delta_peak_pct", "base_samples", "new_samples")


def pct_change(delta: float, base: float | None) -> float | None:
    """``delta`` as a percentage of ``base``; None when base is 0 or unknown."""
    return None if base is None or not base or not np.isfinite(base) else 100.0 * delta / base


def as_number(value) -> float | None:
    """A float, or None for a missing value (JSON has no NaN)."""
    return None if value is None or pd.isna(value) else float(value)


def copy_summary(ops: pd.DataFrame) -> dict:
    """Host↔device copies of a ``summary.ops`` frame, per (rank, step) unit.

    Copies are the rows of category ``memcpy``, by their ``direction``; units are the
    (rank, step) pairs of the whole frame (a unit without a copy counts as zero).
    Returns ``{"units", "count", "time_us", "directions": {direction: {"count",
    "time_us"}}}``, counts and µs as means per unit; ``units`` is 0 for an empty frame.
    """
    units = int(units_of(ops).nunique()) if len(ops) else 0
    copies = ops[(ops["category"] == "memcpy").to_numpy()]  # on the codes, no text per row
    grouped = copies.groupby(copies["direction"].astype(str), sort=True)[["count", "total_us"]]
    totals = grouped.sum()
    per_unit = max(units, 1)
    directions = {str(d): {"count": float(row["count"]) / per_unit,
                           "time_us": float(row["total_us"]) / per_unit}
                  for d, row in totals.iterrows()}
    return {"units": units, "count": float(copies["count"].sum()) / per_unit,
            "time_us": float(copies["total_us"].sum()) / per_unit, "directions": directions}


def _copy_bytes(copies: pd.DataFrame) -> pd.Series:
    """MB per rank by direction: db totals, mean over the ranks that recorded copies."""
    if copies.empty:
        return pd.Series(dtype="float64")
    ranks = max(copies["rank"].nunique(), 1)
    return copies.groupby("direction")["bytes"].sum() / MIB_BYTES / ranks


def _diff(base: float | None, new: float | None) -> float | None:
    return None if base is None or new is None else new - base


def _copy_row(direction: str, base: dict | None, new: dict | None,
              base_mb: float | None, new_mb: float | None) -> tuple:
    base_time, new_time = (as_number(s["time_us"]) if s is not None else None for s in (base, new))
    delta = _diff(base_time, new_time)
    return (direction, as_number(base["count"]) if base is not None else None,
            as_number(new["count"]) if new is not None else None, base_time, new_time,
            delta, None if delta is None else pct_change(delta, base_time),
            base_mb, new_mb, _diff(base_mb, new_mb))


def _rows(rows: list[tuple], columns: tuple[str, ...]) -> pd.DataFrame:
    """Records as a frame of object columns, so that None stays None."""
    return pd.DataFrame(rows, columns=list(columns), dtype=object)


def copy_changes(base: MemoryData, new: MemoryData, base_copies: dict | None,
                  new_copies: dict | None) -> tuple[tuple[int, int] | None,
                                                    pd.DataFrame, pd.DataFrame | None]:
    """Units of each side, a row per copy direction (COPY_FIELDS), and their total row.

    ``(None, no rows, None)`` when neither run copied anything.
    """
    base_mb, new_mb = _copy_bytes(base.copies), _copy_bytes(new.copies)
    counted = [s for s in (base_copies, new_copies) if s is not None]
    if not (any(s["count"] for s in counted) or len(base_mb) or len(new_mb)):
        return None, _rows([], COPY_FIELDS), None
    zero = {"count": 0.0, "time_us": 0.0}

    def side(summary: dict | None, direction: str) -> dict | None:
        return None if summary is None else summary["directions"].get(direction, zero)

    def mb(table: pd.Series, has_db: bool, direction: str | None = None) -> float | None:
        if not has_db:
            return None
        return float(table.sum() if direction is None else table.get(direction, 0.0))

    has_base_db, has_new_db = len(base_mb) > 0, len(new_mb) > 0
    seen = set(base_mb.index) | set(new_mb.index)
    for summary in counted:
        seen |= set(summary["directions"])
    rows = [_copy_row(d, side(base_copies, d), side(new_copies, d),
                      mb(base_mb, has_base_db, d), mb(new_mb, has_new_db, d))
            for d in COPY_DIRECTIONS if d in seen]
    total = _copy_row("all", base_copies, new_copies, mb(base_mb, has_base_db),
                      mb(new_mb, has_new_db))
    units = (base_copies["units"] if base_copies else 0, new_copies["units"] if new_copies else 0)
    return units, _rows(rows, COPY_FIELDS), _rows([total], COPY_FIELDS)


def _bandwidth(data: MemoryData) -> pd.DataFrame:
    by_direction = data.summary.hbm.groupby("direction")
    table = by_direction.agg(samples=("samples", "sum"), total=("total_gbps", "sum"),
                             peak=("peak_gbps", "max"))
    table["mean"] = table["total"] / table["samples"]
    return table


def hbm_changes(base: MemoryData, new: MemoryData) -> pd.DataFrame:
    """Mean and peak HBM bandwidth per direction (read/write), base vs new (HBM_FIELDS)."""
    b, n = _bandwidth(base), _bandwidth(new)
    rows = []
    for direction in ("read", "write"):
        if direction not in b.index and direction not in n.index:
            continue
        bs = b.loc[direction] if direction in b.index else None
        ns = n.loc[direction] if direction in n.index else None
        values = {f"{side}_{k}_gbps": (None if s is None else float(s[k]))
                  for side, s in (("base", bs), ("new", ns)) for k in ("mean", "peak")}
        deltas = {}
        for k in ("mean", "peak"):
            delta = _diff(values[f"base_{k}_gbps"], values[f"new_{k}_gbps"])
            deltas[f"delta_{k}_gbps"] = delta
            deltas[f"delta_{k}_pct"] = None if delta is None else \
                pct_change(delta, values[f"base_{k}_gbps"])
        rows.append((
            direction, values["base_mean_gbps"], values["new_mean_gbps"],
            deltas["delta_mean_gbps"], deltas["delta_mean_pct"], values["base_peak_gbps"],
            values["new_peak_gbps"], deltas["delta_peak_gbps"], deltas["delta_peak_pct"],
            0 if bs is None else int(bs["samples"]), 0 if ns is None else int(ns["samples"])))
    return _rows(rows, HBM_FIELDS)


def movement_notes(base: MemoryData, new: MemoryData) -> list[Note]:
    """What cannot be compared because only one run recorded it."""
    sampled = [side for side, data in (("base", base), ("new", new)) if len(data.summary.hbm)]
    if len(sampled) == 1:
        return [Note("memory", f"HBM bandwidth sampled in the {sampled[0]} run only; "
                     "not compared")]
    return []
