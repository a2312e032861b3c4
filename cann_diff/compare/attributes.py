"""Why each operator changed: its kernels' attributes and PMU pipes, base vs new.

Per matched key and side (docs/design.md "Why operators changed"):

* the **value** of each attribute (``schema.ATTRIBUTES``: core, block dim, mix block dim,
  op state, input formats, input dtypes, HF32, implementation) is its modal value by
  kernel time, with its **share** of the time of the key's kernels that record the
  attribute and the kernels it covers ("32, 12 of 13 kernels");
* an attribute **changed** when the modal values differ *and* at least
  ``Thresholds.attribute_change_share`` of the key's kernel time runs with another
  value: the total variation distance between the two sides' value shares
  (½ Σ |share_new − share_base|) is at least one half by default. A key
  that mixes values (half its time on 32 cores, half on 16) may see its mode flip on
  noise; its shares then move by a few points, never by half, so nothing changed. Input
  formats and dtypes compare over the inputs both modal values have (a bias input that one
  side takes is no format change), formats without ``FORMAT_`` and sub-format (``:1``);
* the **pipes** are Σ(ratio · dur) / Σ dur over the key's kernels that record PMU
  counters, and the **bound** is the pipe of the largest ratio (cube-, vector-, MTE2 /
  memory- or scalar-bound);
* the **why** of a key is a short text: the attributes that changed and the bound with
  its shift ("block dim 32→16; MTE2 0.41→0.72: memory-bound"), or, when its time moved
  with every recorded attribute alike, "same placement and implementation: the kernel
  itself" (the kernel library's own change). A run that records none says so:
  "not recorded (Level0)", "not recorded (aic_metrics=…)", never a guess.

Pure: reads ``RunSummary.attributes`` / ``pipes`` through the match stage's key ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..match import Matched
from ..schema import ATTRIBUTE_LABELS as LABELS
from ..schema import ATTRIBUTES, BOUND_WORDS, KERNEL_ITSELF, PIPES, Run, RunSummary
from ..schema import PIPE_LABELS as PIPE_NAMES
from ..settings import DEFAULT_THRESHOLDS
from ..vocab.names import MISSING

# Implementations listed per key and side (largest kernel time first).
IMPLEMENTATIONS_SHOWN = 5
# Attributes whose value is one entry per input (``;``-separated): compared over the inputs
# both modal values have.
PER_INPUT = ("input_formats", "input_dtypes")
PLACEMENT = ("core", "block_dim", "mix_block_dim")
SIDES = ("base", "new")
# Statuses whose time established a move: the per-instance verdicts.
MOVED = ("regressed", "improved")

PIPE_INDEX = {name: i for i, name in enumerate(PIPES)}


@dataclass(frozen=True)
class AttributeComparison:
    """Per operator key, its attributes and pipes on both sides and what changed.

    ``table`` (index ``key_id``, only keys with any attribute or pipe recorded):
    per side and attribute ``<side>_<attr>`` (the modal value as text, None when not
    recorded), ``<side>_<attr>_share`` (its share of the time of the key's kernels that
    record the attribute, 0-1), ``<side>_<attr>_count`` (kernels with that value) and
    ``<side>_<attr>_kernels`` (kernels recording it); ``<side>_implementations`` (tuple of
    (name, kernels), largest time first); ``<side>_pmu_us`` and ``<side>_pipe_<pipe>``
    (ratio 0-1), ``<side>_bound`` (the pipe of the largest ratio); ``changed`` (tuple of
    the attribute names that changed, in ``ATTRIBUTES`` order). ``changes``: one row per
    (key_id, attribute) that changed, with ``base``, ``new`` (modal values) and
    ``moved_share`` (the total variation distance). ``not_recorded``: per side, why the
    run records no attributes (``attributes``) or no pipes (``pipes``), e.g. ``Level0``,
    ``aic_metrics=ACL_AICORE_NONE``; None where it records them.
    """

    table: pd.DataFrame
    changes: pd.DataFrame
    not_recorded: dict[str, dict[str, str | None]] = field(default_factory=dict)

    @property
    def recorded(self) -> bool:
        """Whether either run records any attribute or pipe."""
        return not self.table.empty


def empty_attributes() -> AttributeComparison:
    """Nothing recorded on either side."""
    return AttributeComparison(pd.DataFrame(index=pd.Index([], name="key_id")),
                               pd.DataFrame(columns=["key_id", "attribute", "base", "new",
                                                     "moved_share"]),
                               {side: {"attributes": None, "pipes": None} for side in SIDES})


# --------------------------------------------------------------------------- values


_INSTANCE = re.compile(r"(?:[_-]?\d+)+$")
_VERSION = re.compile(r"V\d+$")
_FORMAT_PREFIX = re.compile(r"(^|;)FORMAT_")
_SUB_FORMAT = re.compile(r":\d+(?=;|$)")
_DTYPE_PREFIX = re.compile(r"(^|;)DT_")
HF32_WORDS = {"TRUE": "YES", "FALSE": "NO", "1": "YES", "0": "NO"}


def implementation_name(name: str) -> str:
    """A kernel name without instance numbers: ``MatMul28`` → ``MatMul``.

    As a type is derived from a name (vocab/names.py): ``trans_TransData_17`` →
    ``trans_TransData``; a versioned name keeps its version digit (``LogSoftmaxV2``).
    """
    graph = _INSTANCE.sub("", name)
    if graph.endswith("V") and _VERSION.search(name):
        graph = re.sub(r"(V\d)\d*$", r"\1", name)
    return graph or name


def _whole(text: str) -> str:
    """A whole number as integer text (``32.0`` → ``32``); other text as it is."""
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def normalized_value(attribute: str, value) -> str | None:
    """One (attribute, value) as the text compared; None where nothing is recorded.

    Kernel names lose their instance numbers, formats their ``FORMAT_`` prefix and
    sub-format (``NC1HWC0:1``), dtypes their ``DT_`` prefix; core, dtypes, formats and
    HF32 (YES / NO) upper case, op state lower case; block dims as whole numbers.
    """
    text = "" if value is None or (isinstance(value, float) and value != value) \
        else str(value).strip()
    if text.upper() in MISSING:
        return None
    if attribute in ("block_dim", "mix_block_dim"):
        return _whole(text)
    if attribute == "op_state":
        return text.lower()
    if attribute == "input_formats":
        return _SUB_FORMAT.sub("", _FORMAT_PREFIX.sub(r"\1", text.upper()))
    if attribute == "input_dtypes":
        return _DTYPE_PREFIX.sub(r"\1", text.upper())
    if attribute == "hf32":
        return HF32_WORDS.get(text.upper(), text.upper())
    if attribute == "implementation":
        return implementation_name(text)
    return text.upper() if attribute == "core" else text


N_ATTRIBUTES = len(ATTRIBUTES)
POSITION = {name: i for i, name in enumerate(ATTRIBUTES)}


@dataclass(frozen=True)
class Cells:
    """One side's kernels per (key, attribute, value), as arrays of equal length.

    ``cell`` is key_id · N_ATTRIBUTES + the attribute's position in ``ATTRIBUTES``;
    ``value`` a code into the texts both sides share (codes in text order); ``count``
    the kernels and ``total`` their µs. Sorted by (cell, value).
    """

    cell: np.ndarray
    value: np.ndarray
    count: np.ndarray
    total: np.ndarray


@dataclass(frozen=True)
class _Recorded:
    """One side's attribute rows, unrecorded values dropped.

    Per row ``cell``, ``count``, ``total`` and ``pair``, a code into ``texts`` (the
    normalized distinct values).
    """

    cell: np.ndarray
    pair: np.ndarray
    count: np.ndarray
    total: np.ndarray
    texts: np.ndarray


def _positions(column: pd.Series) -> np.ndarray:
    """Each row's attribute as its position in ``ATTRIBUTES`` (-1: another name)."""
    if isinstance(column.dtype, pd.CategoricalDtype):  # the schema's: map its categories
        lookup = np.array([POSITION.get(str(c), -1) for c in column.cat.categories] + [-1])
        codes = column.cat.codes.to_numpy()
        return lookup[np.where(codes >= 0, codes, len(lookup) - 1)]
    return column.astype(str).map(POSITION).fillna(-1).to_numpy(np.int64)


def _recorded(summary: RunSummary, keys: np.ndarray) -> _Recorded:
    """One side's attribute rows with their key's cell and normalized value.

    The text is normalized once per distinct (attribute, value), never per row.
    """
    attrs = summary.attributes
    if attrs is None or attrs.empty:
        nothing = np.zeros(0, np.int64)
        return _Recorded(nothing, nothing, nothing, np.zeros(0), np.zeros(0, object))
    position = _positions(attrs["attribute"])
    values = attrs["value"].to_numpy(dtype=object)
    value_code, _ = pd.factorize(values, use_na_sentinel=False)
    pair, _ = pd.factorize(position * (int(value_code.max(initial=0)) + 1) + value_code)
    first = np.unique(pair, return_index=True)[1]
    names = np.asarray(ATTRIBUTES + ("",), dtype=object)[position[first]]
    # Once per distinct (attribute, value): a few hundred, whatever the kernels.
    texts = np.array([normalized_value(name, value) if name else None
                      for name, value in zip(names, values[first])], dtype=object)
    kept = np.array([text is not None for text in texts], dtype=bool)[pair]
    cell = keys[attrs["row"].to_numpy(np.int64)] * N_ATTRIBUTES + position
    return _Recorded(cell[kept], pair[kept], attrs["count"].to_numpy(np.int64)[kept],
                     attrs["total_us"].to_numpy(float)[kept], texts)


def _grouped(side: _Recorded, code_of_pair: np.ndarray) -> Cells:
    """Kernels summed per (cell, value): hashed, then only the groups sorted."""
    value = code_of_pair[side.pair]
    width = int(code_of_pair.max(initial=0)) + 1
    group, ids = pd.factorize(side.cell * width + value)
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    count = np.bincount(group, side.count, len(ids))[order].astype(np.int64)
    total = np.bincount(group, side.total, len(ids))[order]
    return Cells(ids[order] // width, ids[order] % width, count, total)


def side_cells(base: RunSummary, new: RunSummary, matched: Matched
               ) -> tuple[Cells, Cells, np.ndarray]:
    """Both sides' ``Cells`` and the texts their value codes index (in text order)."""
    sides = (_recorded(base, matched.base_key), _recorded(new, matched.new_key))
    every = np.concatenate([sides[0].texts, sides[1].texts])
    known = np.array([text is not None for text in every], dtype=bool)
    codes, texts = pd.factorize(every[known], sort=True)
    code_of = np.full(len(every), -1, dtype=np.int64)
    code_of[known] = codes
    split = len(sides[0].texts)
    return (_grouped(sides[0], code_of[:split]), _grouped(sides[1], code_of[split:]),
            np.asarray(texts, dtype=object))


@dataclass(frozen=True)
class Modes:
    """Per cell of a side: its modal value, the value's share, count and the kernels.

    The modal value has the most kernel time (ties: most kernels, then the first text);
    ``share`` is its part of the cell's time (of its kernels when that time is 0).
    """

    cell: np.ndarray
    value: np.ndarray
    share: np.ndarray
    count: np.ndarray
    kernels: np.ndarray


def _shares(cell: np.ndarray, count: np.ndarray, total: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Per row (rows grouped by ``cell``, in order): its share of its cell, the kernels.

    The share is by time, or by kernels where the cell's time is 0.
    """
    start = np.r_[True, cell[1:] != cell[:-1]] if len(cell) else np.zeros(0, bool)
    group = np.cumsum(start) - 1
    time = np.bincount(group, total)[group]
    kernels = np.bincount(group, count)[group]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(time > 0, total / time, count / kernels)
    return share, kernels


def modal_values(cells: Cells) -> Modes:
    """The ``Modes`` of a side's ``Cells``."""
    share, kernels = _shares(cells.cell, cells.count, cells.total)
    order = np.lexsort((cells.value, -cells.count, -cells.total, cells.cell))
    ordered = cells.cell[order]
    first = order[np.r_[True, ordered[1:] != ordered[:-1]]] if len(order) else order
    return Modes(cells.cell[first], cells.value[first], share[first],
                 cells.count[first], kernels[first].astype(np.int64))


# --------------------------------------------------------------------------- changes


def _inputs(texts: np.ndarray) -> np.ndarray:
    """Entries of each ``;``-separated text (one per distinct text)."""
    return np.array([text.count(";") + 1 for text in texts], dtype=np.int64)


def _cut(texts: np.ndarray, value: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    """Each value's text cut to its first ``inputs`` entries (0: whole), as text."""
    out = texts[value].copy() if len(value) else np.zeros(0, object)
    for i in np.flatnonzero(inputs > 0):  # the per-input rows only: few
        out[i] = ";".join(out[i].split(";")[:inputs[i]])
    return out


def find_changes(base: Cells, new: Cells, texts: np.ndarray,
                 change_share: float = DEFAULT_THRESHOLDS.attribute_change_share
                 ) -> pd.DataFrame:
    """Per cell recorded on both sides that changed (see the module doc).

    Columns: key_id, attribute, base, new (the modal values), moved_share (the total
    variation distance between the sides' shares of the compared forms, 0-1).
    """
    columns = ["key_id", "attribute", "base", "new", "moved_share"]
    modes = modal_values(base), modal_values(new)
    common, at_base, at_new = np.intersect1d(modes[0].cell, modes[1].cell,
                                             return_indices=True)
    if not len(common):
        return pd.DataFrame(columns=columns)
    per_input = np.isin(common % N_ATTRIBUTES, [POSITION[a] for a in PER_INPUT])
    entries = _inputs(texts)
    cut = np.where(per_input, np.minimum(entries[modes[0].value[at_base]],
                                         entries[modes[1].value[at_new]]), 0)
    forms, weights = [], []
    for cells in (base, new):
        inside = np.isin(cells.cell, common)
        cell = cells.cell[inside]
        where = np.searchsorted(common, cell)
        forms.append((where, _cut(texts, cells.value[inside], cut[where])))
        weights.append((cells.count[inside], cells.total[inside]))
    mode_forms = (_cut(texts, modes[0].value[at_base], cut),
                  _cut(texts, modes[1].value[at_new], cut))
    codes, _ = pd.factorize(np.concatenate([forms[0][1], forms[1][1], *mode_forms]))
    n_forms = int(codes.max(initial=0)) + 1
    gap = []
    offset = 0
    for (where, form), (count, total), sign in zip(forms, weights, (-1.0, 1.0)):
        code = codes[offset:offset + len(form)]
        offset += len(form)
        ids, inverse = np.unique(where * n_forms + code, return_inverse=True)
        grouped_count = np.bincount(inverse, count, len(ids))
        grouped_total = np.bincount(inverse, total, len(ids))
        share, _ = _shares(ids // n_forms, grouped_count, grouped_total)
        gap.append((ids, sign * share))
    ids, inverse = np.unique(np.concatenate([gap[0][0], gap[1][0]]), return_inverse=True)
    net = np.abs(np.bincount(inverse, np.concatenate([gap[0][1], gap[1][1]]), len(ids)))
    moved = np.bincount(ids // n_forms, net, len(common)) / 2
    base_form = codes[offset:offset + len(common)]
    new_form = codes[offset + len(common):]
    changed = (base_form != new_form) & (moved >= change_share)
    return pd.DataFrame({
        "key_id": common[changed] // N_ATTRIBUTES,
        "attribute": np.asarray(ATTRIBUTES, dtype=object)[common[changed] % N_ATTRIBUTES],
        "base": texts[modes[0].value[at_base][changed]],
        "new": texts[modes[1].value[at_new][changed]],
        "moved_share": moved[changed]})[columns]


# --------------------------------------------------------------------------- pipes


def side_pipes(summary: RunSummary, keys: np.ndarray) -> pd.DataFrame:
    """Per key_id: ``pmu_us``, each pipe's ratio Σ(ratio·dur)/Σdur (0-1) and ``bound``.

    ``bound`` is the pipe of the largest ratio; None when no ratio is above 0.
    """
    pipes = summary.pipes
    if pipes is None or pipes.empty:
        return pd.DataFrame(columns=["pmu_us", *PIPES, "bound"],
                            index=pd.Index([], name="key_id"))
    ids, inverse = np.unique(keys[pipes["row"].to_numpy(np.int64)], return_inverse=True)
    pmu = np.bincount(inverse, pipes["pmu_us"].to_numpy(float), len(ids))
    sums = pipes[list(PIPES)].to_numpy(float)
    seen = np.column_stack([np.bincount(inverse, ~np.isnan(sums[:, i]), len(ids)) > 0
                            for i in range(len(PIPES))])
    summed = np.column_stack([np.bincount(inverse, np.nan_to_num(sums[:, i]), len(ids))
                              for i in range(len(PIPES))])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = np.where(seen & (pmu[:, None] > 0), summed / pmu[:, None], np.nan)
    best = np.nan_to_num(ratios, nan=-1.0).argmax(axis=1)
    top = np.nan_to_num(ratios, nan=-1.0).max(axis=1)
    out = pd.DataFrame(ratios, columns=list(PIPES), index=pd.Index(ids, name="key_id"))
    out.insert(0, "pmu_us", pmu)
    out["bound"] = np.where(top > 0, np.asarray(PIPES, dtype=object)[best], None)
    return out


# --------------------------------------------------------------------------- the table


def _columns(modes: Modes, texts: np.ndarray, side: str, keys: np.ndarray) -> dict:
    """One side's modal values as columns ``<side>_<attr>`` over ``keys``.

    With ``_share``, ``_count`` and ``_kernels`` beside each; None / NaN where the key
    records the attribute on no kernel.
    """
    out = {}
    key, position = modes.cell // N_ATTRIBUTES, modes.cell % N_ATTRIBUTES
    for attribute, at in POSITION.items():
        mine = position == at
        if not mine.any():
            continue
        where = np.searchsorted(keys, key[mine])
        value = np.full(len(keys), None, dtype=object)
        value[where] = texts[modes.value[mine]]
        out[f"{side}_{attribute}"] = value
        for part in ("share", "count", "kernels"):
            column = np.full(len(keys), np.nan)
            column[where] = getattr(modes, part)[mine]
            out[f"{side}_{attribute}_{part}"] = column
    return out


def _implementations(cells: Cells, texts: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per key of ``keys``, its implementations as ((name, kernels), …).

    Largest time first, at most IMPLEMENTATIONS_SHOWN; () where none is recorded.
    """
    out = np.empty(len(keys), dtype=object)
    out[:] = [()] * len(keys)
    named = np.flatnonzero(cells.cell % N_ATTRIBUTES == POSITION["implementation"])
    if not len(named):
        return out
    order = named[np.lexsort((cells.value[named], -cells.total[named], cells.cell[named]))]
    cell = cells.cell[order]
    start = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    rank = np.arange(len(order)) - np.repeat(start, np.diff(np.r_[start, len(order)]))
    order, cell = order[rank < IMPLEMENTATIONS_SHOWN], cell[rank < IMPLEMENTATIONS_SHOWN]
    pairs = list(zip(texts[cells.value[order]], cells.count[order].tolist()))
    bounds = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    where = np.searchsorted(keys, cell[bounds] // N_ATTRIBUTES)
    for at, begin, end in zip(where, bounds, np.r_[bounds[1:], len(order)]):
        out[at] = tuple(pairs[begin:end])  # per key with implementations
    return out


def _not_recorded(run: Run, recorded: bool, pipes: pd.DataFrame) -> dict[str, str | None]:
    """Why a run records no attributes or no pipes: its profiler level or aic_metrics."""
    config = run.meta.profiler_config
    level = run.meta.profiler_level or config.get("level")
    metrics = config.get("aic_metrics")
    attributes = None if recorded else (level if level == "Level0" else "not in this export")
    # PipeUtilization records them: then the export is what lacks them, not the setting.
    if metrics and "PIPE" in metrics.upper():
        reason = f"not in this export (aic_metrics={metrics})"
    else:
        reason = f"aic_metrics={metrics}" if metrics else (level if level == "Level0" else
                                                           "no PMU columns")
    return {"attributes": attributes, "pipes": None if len(pipes) else reason}


def _changed(changes: pd.DataFrame, keys: np.ndarray) -> dict[str, np.ndarray]:
    """``changed`` (tuple of attribute names per key, ATTRIBUTES order) over ``keys``."""
    matrix = np.zeros((len(keys), N_ATTRIBUTES), dtype=bool)
    where = np.searchsorted(keys, changes["key_id"].to_numpy(np.int64))
    matrix[where, changes["attribute"].map(POSITION).to_numpy(np.int64)] = True
    names = np.asarray(ATTRIBUTES, dtype=object)
    changed = np.empty(len(keys), dtype=object)
    changed[:] = [()] * len(keys)
    for at in np.flatnonzero(matrix.any(axis=1)):  # the keys that changed only
        changed[at] = tuple(names[matrix[at]])
    return {"changed": changed}


def compare_attributes(base: Run, new: Run, matched: Matched,
                       change_share: float = DEFAULT_THRESHOLDS.attribute_change_share
                       ) -> AttributeComparison:
    """Per matched key: attributes and pipes of both sides, and the attributes that changed."""
    base_cells, new_cells, texts = side_cells(base.summary, new.summary, matched)
    cells = {"base": base_cells, "new": new_cells}
    pipes = {"base": side_pipes(base.summary, matched.base_key),
             "new": side_pipes(new.summary, matched.new_key)}
    not_recorded = {side: _not_recorded(run, len(cells[side].cell) > 0, pipes[side])
                    for side, run in (("base", base), ("new", new))}
    keys = np.unique(np.concatenate([
        *(cells[side].cell // N_ATTRIBUTES for side in SIDES),
        *(pipes[side].index.to_numpy(np.int64) for side in SIDES)]).astype(np.int64))
    if not len(keys):
        empty = empty_attributes()
        return AttributeComparison(empty.table, empty.changes, not_recorded)
    columns: dict[str, np.ndarray] = {}
    ratios, bounds = {}, {}
    for side in SIDES:
        columns.update(_columns(modal_values(cells[side]), texts, side, keys))
        columns[f"{side}_implementations"] = _implementations(cells[side], texts, keys)
        held = pipes[side].reindex(keys)
        ratios[side] = held[list(PIPES)].to_numpy(float)
        bounds[side] = held["bound"].to_numpy(dtype=object)
        columns[f"{side}_pmu_us"] = held["pmu_us"].to_numpy(float)
        columns.update({f"{side}_pipe_{name}": ratios[side][:, i]
                        for i, name in enumerate(PIPES)})
        columns[f"{side}_bound"] = bounds[side]
    columns.update(_bound_columns(ratios, bounds))
    changes = find_changes(cells["base"], cells["new"], texts, change_share)
    columns.update(_changed(changes, keys))
    return AttributeComparison(pd.DataFrame(columns, index=pd.Index(keys, name="key_id")),
                               changes, not_recorded)


# --------------------------------------------------------------------------- why


def shown(value: str, attribute: str) -> str:
    """A value as a sentence shows it: ``FRACTAL_NZ;FRACTAL_NZ`` → ``FRACTAL_NZ``."""
    return "/".join(dict.fromkeys(value.split(";"))) if attribute in PER_INPUT else value


def change_phrases(changes: pd.DataFrame) -> pd.Series:
    """Per key_id that changed: ``block dim 32→16; formats FRACTAL_NZ→ND``.

    In ATTRIBUTES order, as ``find_changes`` lists them.
    """
    if changes.empty:
        return pd.Series(dtype=object)
    attribute = changes["attribute"].to_numpy(dtype=object)
    # Kernel names are long: spaced, so that a table cell can wrap between them.
    phrases = [f"{LABELS[a]} {shown(b, a)}{' → ' if a == 'implementation' else '→'}"
               f"{shown(n, a)}"  # per change: few
               for a, b, n in zip(attribute, changes["base"], changes["new"])]
    return pd.Series(phrases, index=changes["key_id"].to_numpy()).groupby(
        level=0, sort=False).agg("; ".join)


def bound_phrases(table: pd.DataFrame) -> pd.Series:
    """Per key, its bound and shift: ``MTE2 0.41→0.72: memory-bound``.

    Another bound in new: ``vector-bound → memory-bound (MTE2 0.30→0.72)``; one side
    only: ``new memory-bound (MTE2 0.72)``; ``""`` without pipes.
    """
    out = pd.Series("", index=table.index, dtype=object)
    if "bound_pipe" not in table or table.empty:
        return out
    pipe = table["bound_pipe"]
    base_bound, new_bound = table["base_bound"], table["new_bound"]
    # A pipe one side's counters lack (910A records no fixpipe) shows as "—", not "nan".
    ratio = {side: table[f"{side}_pipe_ratio"].map("{:.2f}".format).where(
        table[f"{side}_pipe_ratio"].notna(), "—") for side in SIDES}
    name, word = pipe.map(PIPE_NAMES), pipe.map(BOUND_WORDS)
    both = base_bound.notna() & new_bound.notna()
    same = both & (base_bound == new_bound)
    shift = name + " " + ratio["base"] + "→" + ratio["new"]
    out = out.where(~same, shift + ": " + word)
    out = out.where(~(both & ~same),
                    base_bound.map(BOUND_WORDS) + " → " + word + " (" + shift + ")")
    for side, bound in (("base", base_bound), ("new", new_bound)):
        alone = bound.notna() & ~both
        out = out.where(~alone, side + " " + word + " (" + name + " " + ratio[side] + ")")
    return out


def _bound_columns(ratios: dict[str, np.ndarray], bounds: dict[str, np.ndarray]) -> dict:
    """The bound columns of the table, from ``ratios`` (per side a keys × PIPES matrix).

    ``<side>_bound_ratio`` (each side's bound pipe's ratio), ``bound_pipe`` (new's bound,
    else base's), ``<side>_pipe_ratio`` (that pipe's ratio on each side) and
    ``bound_shift`` (new − base).
    """
    pipe = np.where(pd.notna(bounds["new"]), bounds["new"], bounds["base"])
    out = {f"{side}_bound_ratio": _ratio_of(ratios[side], bounds[side]) for side in SIDES}
    out["bound_pipe"] = pipe
    for side in SIDES:
        out[f"{side}_pipe_ratio"] = _ratio_of(ratios[side], pipe)
    out["bound_shift"] = out["new_pipe_ratio"] - out["base_pipe_ratio"]
    return out


def _ratio_of(matrix: np.ndarray, pipe: np.ndarray) -> np.ndarray:
    """Per row of ``matrix`` (keys × PIPES), the ratio of its ``pipe`` (None: NaN)."""
    at = pd.Series(pipe, dtype=object).map(PIPE_INDEX).fillna(-1).to_numpy(np.int64)
    picked = matrix[np.arange(len(at)), np.maximum(at, 0)] if len(at) else np.zeros(0)
    return np.where(at >= 0, picked, np.nan)


# What "same placement and implementation" needs recorded on both sides of a key.
ALIKE_NEEDS = ("core", "implementation")


def _alike_unknown(table: pd.DataFrame, keys: pd.Series) -> np.ndarray:
    """Per operator row, the ``ALIKE_NEEDS`` a side of its key does not record.

    As ``core, kernel``; ``""`` when both sides record them all.
    """
    out = pd.Series("", index=table.index, dtype=object)
    for attribute in ALIKE_NEEDS:
        held = pd.Series(True, index=table.index)
        for side in SIDES:
            column = f"{side}_{attribute}"
            held &= table[column].notna() if column in table else False
        label = LABELS[attribute]
        out = out.where(held, out.where(out == "", out + ", ") + label)
    return out.reindex(keys).fillna("").to_numpy(dtype=object)


def why(operators: pd.DataFrame, attributes: AttributeComparison) -> pd.Series:
    """Per operator row, why its time moved, in a few words; None when nothing is said.

    Keys on both sides and not communication: the attributes that changed and the bound
    with its shift. A key whose time moved (regressed / improved) with every recorded
    attribute alike says ``KERNEL_ITSELF`` when both sides record its core and kernel
    name, else "no recorded attribute changed (core not recorded)"; a run recording no
    attributes says "not recorded (base: Level0)": never a guess.
    """
    keys = operators["key_id"]
    paired = ((operators["base_instances"] > 0) & (operators["new_instances"] > 0)
              & (operators["category"] != "communication")).to_numpy()
    moved = operators["status"].isin(MOVED).to_numpy()
    table = attributes.table
    changes = change_phrases(attributes.changes).reindex(keys).fillna("") \
        .to_numpy(dtype=object)
    needs = table.index[table["bound_pipe"].notna().to_numpy()] if len(table) else table.index
    bounds = bound_phrases(table.loc[needs]).reindex(keys).fillna("").to_numpy(dtype=object)
    lacking = _alike_unknown(table, keys) if len(table) else \
        np.full(len(keys), ", ".join(LABELS[a] for a in ALIKE_NEEDS), dtype=object)
    missing = [f"{side}: {attributes.not_recorded[side]['attributes']}" for side in SIDES
               if attributes.not_recorded.get(side, {}).get("attributes")]
    alike = np.where(lacking == "", KERNEL_ITSELF,
                     "no recorded attribute changed (" + lacking + " not recorded)")
    if missing:
        alike = np.full(len(keys), f"not recorded ({'; '.join(missing)})", dtype=object)
    said = np.where(changes != "", changes, np.where(moved, alike, ""))
    joined = np.where((said != "") & (bounds != ""), said + "; " + bounds, said)
    out = pd.Series(joined, index=operators.index, dtype=object)
    return out.where(paired & (out != ""), None)
