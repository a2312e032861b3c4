"""Framework-operator keys of two runs paired by what the op is: a ladder of three rungs.

On each side a key is (name, input shapes). Each rung pairs what the rungs above left
(the ``match_kind`` column):

* ``exact``: same name and input shapes;
* ``data-inputs``: same name and number of inputs, the shapes equal at every position
  but one or two trailing ones (an index or workspace tensor), with at least two equal
  data inputs ahead of them: ``aten::max_pool2d_with_indices_backward`` whose indices
  went from ``32,192,9,12`` to ``32,192,9,384`` when the stack changed its mask layout
  computes on the same tensors, so it is judged per instance like an exact key. One to
  one within a name: a key with two candidates pairs with neither (left to the next rung);
* ``name``: same name, other shapes of a like size (a batch-size change), compared by
  totals only (status ``reshaped``). A key left on one side folds with the keys of the
  other side whose inputs hold at most ``MAX_SIZE_RATIO`` × more or fewer elements
  (keys linked so, through each other, fold into one paired key): ``aten::copy_`` of a
  64,3,11,11 conv weight (46 k elements) is no counterpart of the copies of 4096,9216 FC
  weights (75 M), since a batch change scales a tensor by its batch factor, not by
  hundreds. A key with no such counterpart stays on its side (added or removed).

What is left is on one side only (``match_kind`` None: added or removed). A paired key is
shown with the base run's shapes; both sides' shapes stay in ``base_input_shapes`` and
``new_input_shapes`` (several, for a ``name`` key, joined by `` | ``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

MATCH_KINDS = ("exact", "data-inputs", "name")
# Kinds whose instances run on the same data inputs: judged per instance.
PER_INSTANCE_KINDS = ("exact", "data-inputs")
# Trailing positions (index, workspace) a data-inputs pair may differ at, and the equal
# non-empty inputs it needs ahead of them: with one (``aten::mm a;b`` vs ``a;c``) the
# other operand changed, which is another product, not another index layout.
MAX_AUXILIARY_INPUTS = 2
MIN_SHARED_DATA_INPUTS = 2
# Largest ratio of input elements between keys a ``name`` fold joins: a batch-size change
# multiplies a tensor by its batch factor (2×, 4×, 8×); copies of a conv weight and of an FC
# weight differ by hundreds.
MAX_SIZE_RATIO = 10.0
SHAPES_JOIN = " | "
KEY_COLUMNS = ("name", "input_shapes", "base_input_shapes", "new_input_shapes", "match_kind")


def key_ids(frame: pd.DataFrame, keys: pd.MultiIndex) -> np.ndarray:
    """Row of ``keys`` (name, input_shapes) of every row, looked up per distinct pair only."""
    names, shapes = frame["name"].astype("category"), frame["input_shapes"].astype("category")
    width = len(shapes.cat.categories) + 1
    pair, distinct = pd.factorize(names.cat.codes.to_numpy(np.int64) * width
                                  + shapes.cat.codes.to_numpy(np.int64))
    text = pd.MultiIndex.from_arrays([
        np.asarray(names.cat.categories.astype(str))[distinct // width],
        np.asarray(shapes.cat.categories.astype(str))[distinct % width]])
    return keys.get_indexer(text)[pair] if len(frame) else np.zeros(0, np.int64)


def own_keys(frame: pd.DataFrame) -> pd.MultiIndex:
    """A side's distinct (name, input_shapes), as text, sorted."""
    pairs = frame[["name", "input_shapes"]].drop_duplicates().astype(str)
    return pd.MultiIndex.from_frame(pairs.sort_values(["name", "input_shapes"]))


@dataclass(frozen=True)
class PairedKeys:
    """The ladder's result: the paired keys, and which one each side's own keys became.

    ``table`` has one row per paired key (KEY_COLUMNS; the row number is its id);
    ``base_ids[i]`` is the paired id of ``base_keys[i]``, alike for new.
    """

    table: pd.DataFrame
    base_keys: pd.MultiIndex
    base_ids: np.ndarray
    new_keys: pd.MultiIndex
    new_ids: np.ndarray

    def ids(self, frame: pd.DataFrame, side: str) -> np.ndarray:
        """Paired key id of every row of ``frame``, one side's rows (name, input_shapes)."""
        own, ids = (self.base_keys, self.base_ids) if side == "base" else \
            (self.new_keys, self.new_ids)
        return ids[key_ids(frame, own)] if len(frame) else np.zeros(0, np.int64)


def data_inputs_match(base_shapes: str, new_shapes: str) -> bool:
    """Whether two shape lists differ only at one or two trailing (index/workspace) inputs.

    Trailing among the positions either side fills: attribute slots after the index
    (empty on both sides) do not count.
    """
    a, b = base_shapes.split(";"), new_shapes.split(";")
    if len(a) != len(b) or a == b:
        return False
    used = max(i + 1 for i, (x, y) in enumerate(zip(a, b)) if x or y)
    differ = [i for i in range(used) if a[i] != b[i]]
    shared = sum(1 for shape in a[:differ[0]] if shape)
    return (len(differ) <= MAX_AUXILIARY_INPUTS and differ[0] >= used - MAX_AUXILIARY_INPUTS
            and shared >= MIN_SHARED_DATA_INPUTS)


def input_elements(shapes: pd.Series) -> np.ndarray:
    """Elements of each key's input tensors: per tensor the product of its dimensions, summed.

    Empty slots (0-D inputs, attributes) hold no tensor; a tensor with a dimension that is
    not a whole number is left out. NaN for a key with no tensor of known size.
    """
    text = pd.Series(np.asarray(shapes, dtype=object), dtype=object).astype(str)
    tensors = text.str.split(";").explode()
    tensors = tensors[(tensors.str.len() > 0).to_numpy()]
    dims = tensors.reset_index(drop=True).str.split(",").explode()
    whole = dims.str.fullmatch(r"\d+").fillna(False).astype(bool)
    known = whole.groupby(level=0).all()
    size = pd.to_numeric(dims.where(whole)).astype(float).groupby(level=0).prod()
    per_tensor = pd.Series(size.where(known).to_numpy(float),
                           index=tensors.index.to_numpy()[known.index.to_numpy()])
    summed = per_tensor.groupby(level=0).sum(min_count=1)
    return summed.reindex(range(len(text))).to_numpy(float)


def size_groups(keys: pd.DataFrame, max_ratio: float = MAX_SIZE_RATIO) -> np.ndarray:
    """Group of every key (``name``, ``input_shapes``, ``on_base``), linked across sides by size.

    Within a name, a base and a new key link when the larger holds at most ``max_ratio`` ×
    the input elements of the smaller; a group is a connected component of those links,
    so a key with no link is a group of its own. A key of unknown size links with every
    key of the other side (no evidence against). Group numbers are arbitrary.

    On a name's sorted log sizes a component is a run of neighbours (a key between two
    linked keys of a component is within the ratio of one of them), so a cut falls
    between neighbours no link spans: no base key below and new key above within the
    ratio, nor the other way round. Prefix maxima and suffix minima per name find the
    cuts of every name at once: O(k log k), where a pairwise search is O(k²) a name.
    """
    size = input_elements(keys["input_shapes"])
    on_base = keys["on_base"].to_numpy(bool)
    name = pd.factorize(keys["name"])[0]
    log = np.log(np.maximum(size, 1.0))  # an empty tensor counts as one element
    known = np.flatnonzero(~np.isnan(size))
    rows = known[np.lexsort((log[known], name[known]))]
    side, log_rows = on_base[rows], log[rows]
    ends = pd.DataFrame({"name": name[rows],
                         "base_low": np.where(side, log_rows, -np.inf),
                         "new_low": np.where(side, -np.inf, log_rows)})
    below = ends.groupby("name", sort=False)[["base_low", "new_low"]].cummax().to_numpy()
    above = pd.DataFrame({"name": ends["name"].to_numpy()[::-1],
                          "base": np.where(side, log_rows, np.inf)[::-1],
                          "new": np.where(side, np.inf, log_rows)[::-1]}).groupby(
        "name", sort=False)[["base", "new"]].cummin().to_numpy()[::-1]
    reach = np.log(max_ratio)
    spanned = ((ends["name"].to_numpy()[1:] == ends["name"].to_numpy()[:-1])
               & ((above[1:, 1] - below[:-1, 0] <= reach)
                  | (above[1:, 0] - below[:-1, 1] <= reach)))
    group = np.empty(len(keys), np.int64)
    group[rows] = np.cumsum(np.r_[True, ~spanned])[:len(rows)] - 1
    unknown = np.isnan(size)
    group[unknown] = len(rows) + np.arange(unknown.sum())
    return _join_unknown(group, name, on_base, unknown)


def _join_unknown(group: np.ndarray, name: np.ndarray, on_base: np.ndarray,
                  unknown: np.ndarray) -> np.ndarray:
    """Groups with every key of unknown size joined to the groups of its name's other side."""
    def per_name(flags: np.ndarray) -> np.ndarray:
        return np.bincount(name, weights=flags, minlength=name.max() + 1)[name] > 0

    if not unknown.any():
        return group
    joins = ((unknown & on_base & per_name(~on_base)) | (~on_base & per_name(unknown & on_base))
             | (unknown & ~on_base & per_name(on_base)) | (on_base & per_name(unknown & ~on_base)))
    merged = (np.bincount(group, weights=joins, minlength=group.max() + 1) > 0)[group]
    group = group.copy()
    group[merged] = pd.Series(group[merged]).groupby(name[merged]).transform("min").to_numpy()
    return group


def _data_input_pairs(base: list[str], new: list[str]) -> list[tuple[str, str]]:
    """The unambiguous data-inputs pairs among one name's unpaired keys."""
    by_lead = defaultdict(list)  # candidates share their length and first input
    for shapes in new:
        by_lead[(shapes.count(";"), shapes.split(";")[0])].append(shapes)
    candidates = [(b, n) for b in base for n in by_lead[(b.count(";"), b.split(";")[0])]
                  if data_inputs_match(b, n)]
    per_base, per_new = Counter(b for b, _ in candidates), Counter(n for _, n in candidates)
    return [(b, n) for b, n in candidates if per_base[b] == 1 and per_new[n] == 1]


def _pair_within_name(name: str, base: list[str], new: list[str]
                      ) -> tuple[list[tuple], list[str], list[str]]:
    """One name's exact and data-inputs pairs, and the shapes left for the ``name`` rung.

    The pairs are (name, base shapes, new shapes, match_kind); then the base and the new
    shapes no pair took.
    """
    exact = set(base) & set(new)
    groups: list[tuple] = [(name, [s], [s], "exact") for s in sorted(exact)]
    base = [s for s in base if s not in exact]
    new = [s for s in new if s not in exact]
    pairs = _data_input_pairs(base, new)
    groups += [(name, [b], [n], "data-inputs") for b, n in pairs]
    paired_base, paired_new = {b for b, _ in pairs}, {n for _, n in pairs}
    return (groups, [s for s in base if s not in paired_base],
            [s for s in new if s not in paired_new])


def _by_name(left: pd.DataFrame) -> list[tuple]:
    """(name, base shapes, new shapes, match_kind) of the keys the first rungs left.

    A size group with keys on both sides folds into one ``name`` key; a key alone stays
    on its side (match_kind None).
    """
    if left.empty:
        return []
    left = left.assign(group=size_groups(left))
    names = left.groupby("group")["name"].first()
    base, new = (left[(left["on_base"] == side).to_numpy()].groupby("group")["input_shapes"]
                 .agg(list) for side in (True, False))
    return [(name, base.get(group, []), new.get(group, []),
             "name" if group in base.index and group in new.index else None)
            for group, name in names.items()]


def _shapes_by_name(keys: pd.MultiIndex) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for name, shapes in keys:
        grouped[name].append(shapes)
    return grouped


def pair_keys(base: pd.DataFrame, new: pd.DataFrame) -> PairedKeys:
    """Pair the (name, input_shapes) keys of two runs' framework rows by the ladder."""
    base_keys, new_keys = own_keys(base), own_keys(new)
    by_base, by_new = _shapes_by_name(base_keys), _shapes_by_name(new_keys)
    groups, left = [], []
    for name in sorted(set(by_base) | set(by_new)):
        paired, base_left, new_left = _pair_within_name(name, by_base.get(name, []),
                                                        by_new.get(name, []))
        groups += paired
        left += [(name, s, True) for s in base_left] + [(name, s, False) for s in new_left]
    groups += _by_name(pd.DataFrame(left, columns=["name", "input_shapes", "on_base"]))
    table = pd.DataFrame([{
        "name": name, "input_shapes": SHAPES_JOIN.join(b_shapes or n_shapes),
        "base_input_shapes": SHAPES_JOIN.join(b_shapes) if b_shapes else None,
        "new_input_shapes": SHAPES_JOIN.join(n_shapes) if n_shapes else None,
        "match_kind": kind, "_base": b_shapes, "_new": n_shapes}
        for name, b_shapes, n_shapes, kind in groups], columns=[*KEY_COLUMNS, "_base", "_new"])
    table = table.sort_values(["name", "input_shapes"], kind="mergesort").reset_index(drop=True)
    for column in KEY_COLUMNS[2:]:  # None, not NaN, where a side has no such key
        table[column] = table[column].astype(object).where(table[column].notna(), None)
    ids = []
    for side, keys in (("_base", base_keys), ("_new", new_keys)):
        owned = table[side].explode().dropna()
        found = pd.Series(owned.index, index=pd.MultiIndex.from_arrays(
            [table.loc[owned.index, "name"], owned.astype(str)]))
        ids.append(found.reindex(keys).to_numpy(np.int64))
    return PairedKeys(table[list(KEY_COLUMNS)], base_keys, ids[0], new_keys, ids[1])
