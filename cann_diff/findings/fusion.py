"""MC2 fusion: a fused compute+communication op on one side, its split ops on the other.

Fused and split ops pair by key (``op_type``, ``input_shapes``): the fused keys lost, the
collectives and compute keys gained. Several fused types can split into MatMuls of the
same shapes (a dense layer's MatmulAllReduce and a sequence-parallel layer's
MatmulReduceScatter both multiply [T, k]×[k, H]); their split MatMuls then share one key,
and the key's mean would give every type the same MatMul time. Where the runs' summaries
say which collective each MatMul-like kernel runs next to (``RunSummary.adjacent``), a
type claims the instances next to its own collective, with their own time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compare import Comparison
from ..schema import RunSummary
from ..vocab import FusedOp, Vocabulary, default_vocabulary
from .base import Finding, ms


@dataclass(frozen=True)
class FusionGroup:
    """A fused MC2 op on one side matched to its split equivalent on the other.

    Counts are per step; ``split_counts`` maps each split family or comm type to the
    number of ops per step attributed to this group; times are µs per step.
    ``base_claims``/``new_claims`` map operator keys to the instances per step of that
    key, on that side, that belong to the group: the fused ops lost (or gained) and the
    split ops that replaced them, never the other instances of a key whose count changed
    (ordinary MatMuls of the same shape stay ordinary).
    """

    fused_type: str
    direction: str  # "split": base fused, new split; "fused": the opposite
    split_types: tuple[str, ...]
    base_count: float
    new_count: float
    split_counts: dict[str, float]
    base_total_us: float
    new_total_us: float
    exposed_us: float
    paired_by: str  # "shapes" or "counts"
    spec: FusedOp
    base_claims: dict[int, float] = field(default_factory=dict)
    new_claims: dict[int, float] = field(default_factory=dict)
    # Of the split side's compute claims, those made by adjacency: instances per step per
    # (key, collective they run next to). Empty when the runs carry no adjacency.
    adjacent_claims: dict[tuple[int, str], float] = field(default_factory=dict)

    @property
    def delta_us(self) -> float:
        """New minus base time of the group (µs per step)."""
        return self.new_total_us - self.base_total_us


# Adjacent cells (``adjacent_cells``, None without adjacency) and the split-side instances
# per (key, collective) earlier groups claimed from them.
Adjacency = tuple[pd.DataFrame | None, dict[tuple[int, str], float]]

# Collectives that gather the fused op's first input before its compute runs (AllGatherMatmul:
# AllGather of x, then MatMul on the gathered x); the rest act on the compute's output.
GATHERING = ("AllGather",)


def _product(shapes: str) -> tuple[float, str]:
    """A kernel's first two data inputs as one product: (rows of x1, "k;weight"), or (nan, "").

    x1's leading dimensions fold into rows (``s,b,h`` is the product of ``s·b,h``); a 2-D
    weight recorded as ``n,k`` (transposed) reads as ``k,n``: x1 ``m,k`` times ``n,k`` is
    no product unless transposed, so either layout is the same MatMul.
    """
    inputs = shapes.split(";") if shapes else []
    dims = [t.split(",") for t in inputs[:2]]
    if len(dims) < 2 or len(dims[0]) < 2 or not all(d.isdigit() for t in dims for d in t):
        return math.nan, ""
    x1, weight = dims
    k = x1[-1]
    if len(weight) == 2 and weight[0] != k and weight[1] == k:
        weight = weight[::-1]
    return float(math.prod(int(d) for d in x1[:-1])), f"{k};{','.join(weight)}"


def _products(shapes: pd.Series) -> pd.DataFrame:
    """``_product`` of each key's normalized shapes (one call per key, never per kernel)."""
    forms = [_product(s if isinstance(s, str) else "") for s in shapes]
    return pd.DataFrame(forms, columns=["rows", "rest"], index=shapes.index)


def _gathers_input(spec: FusedOp) -> bool:
    """Whether a gathering collective runs before the compute in the split order."""
    compute = spec.split.index(spec.compute[0]) if spec.compute[0] in spec.split else 0
    return any(s.startswith(GATHERING) for s in spec.split[:compute])


def adjacent_comm(spec: FusedOp) -> tuple[str, ...]:
    """The collectives right next to the split compute kernel in the split order.

    The one right before it (it gathered the kernel's input: AllGatherMatmul) and the one
    right after it (the kernel feeds it: MatmulAllReduce), as read/reduce/summary.py
    ``split_neighbours`` pairs them.
    """
    if not spec.compute or spec.compute[0] not in spec.split:
        return ()
    at = spec.split.index(spec.compute[0])
    return tuple(s for s in (*spec.split[max(at - 1, 0):at], *spec.split[at + 1:at + 2])
                 if s in spec.comm)


def _side_cells(summary: RunSummary, keys: np.ndarray, units: int) -> pd.DataFrame | None:
    """A side's adjacent kernels per (key_id, comm_type): ``count``, ``total_us`` per step.

    None when its summary carries no adjacency. ``keys``: each summary row's key (a
    side's (op_type, input_shapes) is one key); ``units``: its (rank, step) units.
    """
    adjacent = summary.adjacent
    if adjacent is None:
        return None
    ops = summary.ops
    near = ops["op_type"].isin(pd.unique(adjacent["op_type"].astype(str))).to_numpy()
    lookup = pd.DataFrame({"op_type": ops["op_type"].to_numpy()[near].astype(str),
                           "input_shapes": ops["input_shapes"].to_numpy()[near].astype(str),
                           "key_id": keys[near]}).drop_duplicates(["op_type", "input_shapes"])
    cells = pd.DataFrame({"op_type": adjacent["op_type"].to_numpy().astype(str),
                          "input_shapes": adjacent["input_shapes"].to_numpy().astype(str),
                          "comm_type": adjacent["comm_type"].to_numpy().astype(str),
                          "count": adjacent["count"].to_numpy(np.float64),
                          "total_us": adjacent["total_us"].to_numpy(np.float64)})
    cells = cells.merge(lookup, on=["op_type", "input_shapes"], how="inner")
    return cells.groupby(["key_id", "comm_type"])[["count", "total_us"]].sum() / units


def adjacent_cells(cmp: Comparison) -> pd.DataFrame | None:
    """Both sides' kernels next to a collective, per (key_id, comm_type), per step.

    Columns ``base_count``, ``new_count`` (instances) and ``base_total_us``,
    ``new_total_us`` (µs); None unless both runs carry adjacency.
    """
    base = _side_cells(cmp.base.summary, cmp.matched.base_key, cmp.base_units)
    new = _side_cells(cmp.new.summary, cmp.matched.new_key, cmp.new_units)
    if base is None or new is None:
        return None
    cells = base.add_prefix("base_").join(new.add_prefix("new_"), how="outer").fillna(0.0)
    return cells.reset_index()


def _derived_matches(spec: FusedOp, ops: pd.DataFrame) -> pd.Series:
    """Compute keys whose product is one a changed fused key implies (docs/formats.md §9.5).

    MatmulAllReduce(x, w) and MatmulReduceScatter(x, w) run MatMul(x, w) itself; a gather
    before the compute (AllGatherMatmul) makes it MatMul(gathered x, w): x's rows times
    the gather group's size, which profiles do not record — any whole factor ≥ 2.
    """
    candidates = ops[ops["family"] == spec.compute[0]]
    matched = pd.Series(False, index=candidates.index)
    fused = ops[(ops["op_type"] == spec.fused_type) & (ops["base_count"] != ops["new_count"])]
    if candidates.empty or fused.empty:
        return matched
    have = _products(candidates["match_shapes"])
    gathered = _gathers_input(spec)
    implied = _products(fused["match_shapes"])
    for rows, rest in implied[implied["rows"] > 0].itertuples(index=False):
        factor = have["rows"] / rows
        same_rows = (factor == factor.round()) & (factor >= 2) if gathered else factor == 1
        matched |= same_rows & (have["rest"] == rest)
    return matched


def _shape_owners(ops: pd.DataFrame, specs) -> dict[str, frozenset[int]]:
    """Per fused type, the compute keys its own shapes imply: no other type may claim them."""
    owners = {}
    for spec in specs:
        if spec.compute:
            matched = _derived_matches(spec, ops)
            owners[spec.fused_type] = frozenset(ops.loc[matched[matched].index, "key_id"])
    return owners


def _paired_compute_keys(ops: pd.DataFrame, spec: FusedOp, owners: dict[str, frozenset[int]],
                         split_side: str, fused_side: str):
    """The compute keys a fused type may claim, and how they were paired.

    Its own shape-matched keys that gained instances on the split side; without them (no
    shapes, or none derived), every key of the family that no other type's shapes own.
    """
    candidates = ops[ops["family"] == spec.compute[0]]
    own = candidates["key_id"].isin(owners.get(spec.fused_type, frozenset()))
    gained = candidates[f"{split_side}_count"] > candidates[f"{fused_side}_count"]
    if (own & gained).any():
        return candidates[own], "shapes"
    others = frozenset().union(*(k for t, k in owners.items() if t != spec.fused_type))
    return candidates[~candidates["key_id"].isin(others)], "counts"


def _claim(candidates: pd.DataFrame, gain_side: str, other_side: str, wanted: float,
           taken: dict[int, float]) -> dict[int, float]:
    """Instances per step claimed from the keys that gained most, up to ``wanted`` in all.

    A key gives at most its own gain (``gain_side`` count − ``other_side`` count) less
    what earlier groups took from it (``taken``): the instances it had anyway are not the
    fused op's replacement, and two fused types splitting into the same MatMul share it.
    """
    gain = (candidates[f"{gain_side}_count"] - candidates[f"{other_side}_count"]
            - candidates["key_id"].map(taken).fillna(0.0)).clip(lower=0)
    order = gain.sort_values(ascending=False, kind="stable")
    before = order.cumsum() - order
    taken = np.minimum(order, (wanted - before).clip(lower=0))
    keys = candidates.loc[order.index, "key_id"].to_numpy()
    return {int(k): float(t) for k, t in zip(keys, taken) if t > 1e-9}


def _comm_part(spec: FusedOp, cmp: Comparison, split_side: str, fused_side: str,
               lost: float, taken_before: dict[int, float]):
    """Comm ops of the group per type, their time and exposed time, and their claims."""
    ops = cmp.operators
    comm = cmp.comm_types.set_index("comm_type")
    counts, times, exposed, claims = {}, 0.0, 0.0, {}
    for comm_type in spec.comm:
        if comm_type not in comm.index:
            return None
        row = comm.loc[comm_type]
        gained = row[f"{split_side}_count"] - row[f"{fused_side}_count"]
        if gained < cmp.thresholds.fusion_min_share * lost:
            return None
        taken = min(gained, lost)
        # Marginal cost of the ops gained, not the side's mean op: other collectives of
        # the same type (e.g. a large data-parallel AllReduce) must not inflate it.
        per_op = max(row[f"{split_side}_total_us"] - row[f"{fused_side}_total_us"], 0.0) / gained
        per_op_exposed = max(row[f"{split_side}_exposed_us"]
                             - row[f"{fused_side}_exposed_us"], 0.0) / gained
        counts[comm_type] = taken
        times, exposed = times + taken * per_op, exposed + taken * per_op_exposed
        is_type = (ops["family"] == comm_type) & (ops["category"] == "communication")
        claims.update(_claim(ops[is_type], split_side, fused_side, taken, taken_before))
    return counts, times, exposed, claims


def _claim_adjacent(spec: FusedOp, paired: pd.DataFrame, sides: tuple[str, str],
                    wanted: float, taken: dict[int, float], adjacency: Adjacency):
    """Claims next to the type's own collective: per key, their µs, per (key, collective).

    Instances per step, up to ``wanted``; nothing without adjacency. A cell (key,
    collective) gives at most its gain on the split side less what earlier groups took
    from it, and a key no more than its gain left (``taken``), cells that gained most
    first. An instance costs its cell's marginal time, (split − fused µs) / (split −
    fused instances): ordinary MatMuls of the same shapes next to the same collective on
    both sides (one feeding a data-parallel AllReduce) cancel out. When that is not
    positive, the split side's mean of the cell.
    """
    split_side, fused_side = sides
    cells, cells_taken = adjacency
    comm = adjacent_comm(spec)
    if cells is None or not comm or wanted <= 0:
        return {}, 0.0, {}
    room = (paired.set_index("key_id")[f"{split_side}_count"]
            - paired.set_index("key_id")[f"{fused_side}_count"]
            - paired["key_id"].map(taken).fillna(0.0).to_numpy()).clip(lower=0)
    mine = cells[cells["key_id"].isin(room.index) & cells["comm_type"].isin(comm)]
    if mine.empty:
        return {}, 0.0, {}
    cell = list(zip(mine["key_id"], mine["comm_type"]))
    split_n, fused_n = mine[f"{split_side}_count"], mine[f"{fused_side}_count"]
    gain = (split_n - fused_n - pd.Series([cells_taken.get(c, 0.0) for c in cell],
                                          index=mine.index)).clip(lower=0)
    gain = gain.sort_values(ascending=False, kind="stable")
    key = mine.loc[gain.index, "key_id"]
    before_in_key = gain.groupby(key).cumsum() - gain  # a type next to two collectives
    gain = np.minimum(gain, (key.map(room) - before_in_key).clip(lower=0))
    claimed = np.minimum(gain, (wanted - (gain.cumsum() - gain)).clip(lower=0))
    split_us, fused_us = mine[f"{split_side}_total_us"], mine[f"{fused_side}_total_us"]
    marginal = (split_us - fused_us) / (split_n - fused_n).where(split_n > fused_n)
    each = marginal.where(marginal > 0, split_us / split_n.where(split_n > 0)).fillna(0.0)
    by_cell = {(int(mine.at[i, "key_id"]), str(mine.at[i, "comm_type"])): float(n)
               for i, n in claimed.items() if n > 1e-9}
    claims: dict[int, float] = {}
    for (key, _), n in by_cell.items():
        claims[key] = claims.get(key, 0.0) + n
    return claims, float((claimed * each.loc[claimed.index]).sum()), by_cell


def _compute_part(spec: FusedOp, cmp: Comparison, sides: tuple[str, str], lost: float,
                  taken_before: dict[int, float], owners: dict[str, frozenset[int]],
                  adjacency: Adjacency):
    """Compute ops of the group per family, their time and claims, how they paired.

    Also the claims made by adjacency (``_claim_adjacent``); the rest are claimed by
    key, at the key's mean, as without adjacency.
    """
    split_side, fused_side = sides
    if not spec.compute:
        return {}, 0.0, {}, "counts", {}
    paired, paired_by = _paired_compute_keys(cmp.operators, spec, owners, split_side,
                                             fused_side)
    gained = paired[f"{split_side}_count"].sum() - paired[f"{fused_side}_count"].sum()
    if gained < cmp.thresholds.fusion_min_share * lost:
        return None
    wanted = min(gained, lost)
    claims, time, by_cell = _claim_adjacent(spec, paired, sides, wanted, taken_before,
                                            adjacency)
    taken = {k: taken_before.get(k, 0.0) + claims.get(k, 0.0)
             for k in {*taken_before, *claims}}
    rest = _claim(paired, split_side, fused_side, wanted - sum(claims.values()), taken)
    mean = paired.set_index("key_id")[f"{split_side}_mean_us"]
    time += sum(n * float(mean[k]) for k, n in rest.items())
    for key, n in rest.items():
        claims[key] = claims.get(key, 0.0) + n
    return {spec.compute[0]: sum(claims.values())}, time, claims, paired_by, by_cell


def _detect_one(spec: FusedOp, cmp: Comparison, taken: tuple[dict[int, float], dict[int, float]],
                owners: dict[str, frozenset[int]], cells: pd.DataFrame | None,
                groups: list[FusionGroup]) -> FusionGroup | None:
    """The group of one fused type, or None.

    ``taken``: (base, new) claims ``groups`` made before; ``cells``: ``adjacent_cells``
    (None: no adjacency).
    """
    ops = cmp.operators
    family_rows = ops[ops["family"] == spec.fused_type]
    main = family_rows[family_rows["op_type"] == spec.fused_type]
    fused_base, fused_new = main["base_count"].sum(), main["new_count"].sum()
    if family_rows.empty or fused_base == fused_new:
        return None
    direction = "split" if fused_base > fused_new else "fused"
    split_side, fused_side = ("new", "base") if direction == "split" else ("base", "new")
    lost = abs(fused_base - fused_new)
    taken_before = taken[0] if split_side == "base" else taken[1]
    comm_part = _comm_part(spec, cmp, split_side, fused_side, lost, taken_before)
    cells_taken = _cells_claimed([g for g in groups if g.direction == direction])
    compute_part = (None if comm_part is None else
                    _compute_part(spec, cmp, (split_side, fused_side), lost, taken_before,
                                  owners, (cells, cells_taken)))
    if comm_part is None or compute_part is None:
        return None
    counts, comm_time, exposed, split_claims = comm_part
    compute_counts, compute_time, compute_claims, paired_by, by_cell = compute_part
    counts.update(compute_counts)
    split_claims.update(compute_claims)
    times = comm_time + compute_time
    # The fused family (companions included) gives every instance it lost.
    fused_claims = {int(k): float(v) for k, v in zip(
        family_rows["key_id"], (family_rows[f"{fused_side}_count"]
                                - family_rows[f"{split_side}_count"]).clip(lower=0)) if v > 0}
    base_total = family_rows["base_total_us"].sum() + (times if direction == "fused" else 0.0)
    new_total = family_rows["new_total_us"].sum() + (times if direction == "split" else 0.0)
    base_claims, new_claims = ((fused_claims, split_claims) if direction == "split"
                               else (split_claims, fused_claims))
    return FusionGroup(spec.fused_type, direction, spec.split, float(fused_base),
                       float(fused_new), counts, float(base_total), float(new_total),
                       float(exposed), paired_by, spec, base_claims, new_claims, by_cell)


def _cells_claimed(groups: list[FusionGroup]) -> dict[tuple[int, str], float]:
    """Split-side instances per step the groups claimed by adjacency, per (key, collective)."""
    total: dict[tuple[int, str], float] = {}
    for group in groups:
        for cell, n in group.adjacent_claims.items():
            total[cell] = total.get(cell, 0.0) + n
    return total


def claimed_instances(groups: list[FusionGroup]) -> tuple[dict[int, float], dict[int, float]]:
    """Instances per step claimed by all groups, per key: (base side, new side)."""
    base: dict[int, float] = {}
    new: dict[int, float] = {}
    for group in groups:
        for total, claims in ((base, group.base_claims), (new, group.new_claims)):
            for key, n in claims.items():
                total[key] = total.get(key, 0.0) + n
    return base, new


def detect_fusion(cmp: Comparison, vocab: Vocabulary | None = None):
    """Fusion groups in both directions, and the operator keys they claim entirely.

    A key is claimed entirely (listed with its group, not as an operator of its own)
    when every instance it has on either side belongs to a group; a key of which a group
    claims only some instances stays an operator with its own status.
    """
    groups: list[FusionGroup] = []
    owner: dict[int, str] = {}
    specs = (vocab or default_vocabulary()).fusion.values()
    # Only a fused type the table holds can own shapes or form a group: the others are
    # skipped before the per-type work (≈ 5 ms a type on a small table).
    types, families = set(cmp.operators["op_type"]), set(cmp.operators["family"])
    owners = _shape_owners(cmp.operators, [s for s in specs if s.fused_type in types])
    wanted = [s for s in specs if s.fused_type in families]
    cells = adjacent_cells(cmp) if wanted else None
    for spec in wanted:
        group = _detect_one(spec, cmp, claimed_instances(groups), owners, cells, groups)
        if group:
            groups.append(group)
            for key in (*group.base_claims, *group.new_claims):
                owner.setdefault(int(key), spec.fused_type)
    base, new = claimed_instances(groups)
    counts = cmp.operators.set_index("key_id")[["base_count", "new_count"]]
    entire = {key: fused for key, fused in owner.items()
              if counts.loc[key, "base_count"] - base.get(key, 0.0) < 1e-9
              and counts.loc[key, "new_count"] - new.get(key, 0.0) < 1e-9}
    return groups, entire



def fusion_finding(group: FusionGroup) -> Finding:
    """The ``mc2-split`` or ``mc2-fused`` finding of one group, with how to fuse again."""
    spec = group.spec
    split_text = " + ".join(group.split_types)
    if group.direction == "split":
        title = f"{group.fused_type} now runs split as {split_text}"
        detail = (f"Base ran {group.base_count:g} {group.fused_type} per step, new runs "
                  f"{group.new_count:g}; in their place new runs "
                  + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
                  + f" per step (paired by {group.paired_by}). Time {ms(group.base_total_us)}"
                  f" → {ms(group.new_total_us)} per step, of which {ms(group.exposed_us)} "
                  f"exposed communication. Recommendation: enable MC2 fusion — {spec.enable}"
                  f" ({spec.api}; CANN ≥ {spec.min_cann}).")
        return Finding("mc2-split", "high" if group.delta_us > 0 else "medium", title, detail,
                       group.delta_us, {"fused_type": group.fused_type})
    title = f"{split_text} now runs fused as {group.fused_type}"
    detail = ("Base ran " + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
              + f" per step where new runs {group.new_count:g} {group.fused_type} "
              f"(paired by {group.paired_by}). Time {ms(group.base_total_us)} → "
              f"{ms(group.new_total_us)} per step.")
    return Finding("mc2-fused", "info" if group.delta_us <= 0 else "medium", title, detail,
                   group.delta_us, {"fused_type": group.fused_type})
