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
* ``name``: same name, any shapes (a batch-size change): every key of that name left on
  either side folds into one paired key, compared by totals only (status ``reshaped``).

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


def _data_input_pairs(base: list[str], new: list[str]) -> list[tuple[str, str]]:
    """The unambiguous data-inputs pairs among one name's unpaired keys."""
    by_lead = defaultdict(list)  # candidates share their length and first input
    for shapes in new:
        by_lead[(shapes.count(";"), shapes.split(";")[0])].append(shapes)
    candidates = [(b, n) for b in base for n in by_lead[(b.count(";"), b.split(";")[0])]
                  if data_inputs_match(b, n)]
    per_base, per_new = Counter(b for b, _ in candidates), Counter(n for _, n in candidates)
    return [(b, n) for b, n in candidates if per_base[b] == 1 and per_new[n] == 1]


def _pair_within_name(name: str, base: list[str], new: list[str]) -> list[tuple]:
    """(name, base shapes, new shapes, match_kind) of every paired key of one name."""
    exact = set(base) & set(new)
    groups: list[tuple] = [(name, [s], [s], "exact") for s in sorted(exact)]
    base = [s for s in base if s not in exact]
    new = [s for s in new if s not in exact]
    pairs = _data_input_pairs(base, new)
    groups += [(name, [b], [n], "data-inputs") for b, n in pairs]
    paired_base, paired_new = {b for b, _ in pairs}, {n for _, n in pairs}
    base = [s for s in base if s not in paired_base]
    new = [s for s in new if s not in paired_new]
    if base and new:
        return groups + [(name, base, new, "name")]
    return groups + [(name, [s], [], None) for s in base] + [(name, [], [s], None) for s in new]


def _shapes_by_name(keys: pd.MultiIndex) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for name, shapes in keys:
        grouped[name].append(shapes)
    return grouped


def pair_keys(base: pd.DataFrame, new: pd.DataFrame) -> PairedKeys:
    """Pair the (name, input_shapes) keys of two runs' framework rows by the ladder."""
    base_keys, new_keys = own_keys(base), own_keys(new)
    by_base, by_new = _shapes_by_name(base_keys), _shapes_by_name(new_keys)
    groups = [group for name in sorted(set(by_base) | set(by_new))
              for group in _pair_within_name(name, by_base.get(name, []), by_new.get(name, []))]
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
