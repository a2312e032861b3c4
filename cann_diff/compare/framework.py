"""Framework operators of two runs: paired, aligned per step, judged per operator and module.

Kernels change names across CANN stacks; framework operators (``aten::…``) do not. Keys
(name + input shapes) pair by what the op is (framework_keys.py: ``exact`` →
``data-inputs`` → ``name``), each (rank, step) unit's instances align with their
counterpart on the paired keys (framework_align.py), and every paired key is judged by
the kernel table's status rule (framework_rules.py; docs/design.md "Operator keys"):
the same words in the same order, exact Mann-Whitney at small sizes, BH over the keys
tested. Module paths get the same rule. Roll-ups by name, family and module and the
step-level summary are in framework_rollup.py.

Figures are per step and per rank, µs (as the kernel level's); kernels no link reaches
form one more key, ``(no framework op)`` with one instance per unit, so that the table
adds up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import NO_FRAMEWORK_LINKS, NO_LINKS, UNLINKED, Note, Run
from ..settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS, Limits, Thresholds
from ..vocab.names import COMM_TYPES
from .framework_align import align, align_units
from .framework_keys import PER_INSTANCE_KINDS, PairedKeys, key_ids, pair_keys
from .framework_rollup import ROLLUP_FIELDS, FrameworkSummary, rollup, summarize
from .framework_rules import counts_differ, judge
from .operators import count_units

__all__ = ["FRAMEWORK_OP_FIELDS", "MODULE_FIELDS", "MODULE_RULE_FIELDS", "OP_RULE_FIELDS",
           "ROLLUP_FIELDS", "FrameworkComparison", "FrameworkSummary", "align",
           "compare_framework", "compare_modules", "compare_operators", "key_ids"]

FRAMEWORK_OP_FIELDS = ("name", "input_shapes", "base_count", "new_count", "base_device_us",
                       "new_device_us", "delta_us", "status", "base_kernels", "new_kernels")
# After the report's columns: what the status rule saw, and how the key was paired.
OP_RULE_FIELDS = ("instance_change_pct", "p_value", "tested", "match_kind",
                  "base_input_shapes", "new_input_shapes")
MODULE_FIELDS = ("module", "base_count", "new_count", "base_device_us", "new_device_us",
                 "delta_us", "status")
MODULE_RULE_FIELDS = ("instance_change_pct", "p_value", "tested")
NO_MODULE = "(no module)"
# Kernel types of collectives (the canonical op_type of communication kernels).
COMM_KERNEL_TYPES = frozenset(COMM_TYPES.values()) | {"Communication"}


@dataclass(frozen=True)
class FrameworkComparison:
    """Per framework operator and per module, both runs; figures per step and rank, µs.

    ``operators``: FRAMEWORK_OP_FIELDS then OP_RULE_FIELDS (``*_kernels``: list of
    ``{type, count, device_us}`` per step and rank, largest first; ``instance_change_pct``
    the ratio of median instance times − 1 in %, of paired totals for a collective;
    ``p_value`` BH-adjusted, NaN when not ``tested``; ``match_kind`` the ladder's rung,
    None for a key on one side only), ordered by |delta_us|. ``modules``: MODULE_FIELDS then
    MODULE_RULE_FIELDS, or None when neither run recorded stacks. ``instances``: the
    aligned pairs (``rank``, ``base_step``, ``new_step``, ``name``, ``input_shapes`` of the
    paired key, ``base_device_us``, ``new_device_us``; NaN on the side an instance is
    missing). ``rollup``: ROLLUP_FIELDS. ``summary``: the attributed time and the rest of
    Δ Stage.
    """

    operators: pd.DataFrame
    modules: pd.DataFrame | None
    instances: pd.DataFrame
    rollup: pd.DataFrame
    summary: FrameworkSummary
    notes: tuple[Note, ...] = ()

    @property
    def changed_count(self) -> int:
        """Keys whose status is not ``unchanged``: the N of "N of M changed"."""
        return int((self.operators["status"] != "unchanged").sum())

    @property
    def key_count(self) -> int:
        """Keys in the operator table: the M of "N of M changed"."""
        return len(self.operators)


# ---------------------------------------------------------------- instances

def _instances(frame: pd.DataFrame, keys: PairedKeys, side: str) -> pd.DataFrame:
    """One row per linked op instance, in launch order.

    Columns: rank, step, order, the paired key id (``key``), the paired key's name and
    shapes, module, device µs.
    """
    linked = frame[(frame["name"] != UNLINKED).to_numpy()]
    grouped = linked.groupby(["rank", "step", "order"], observed=True, sort=True, dropna=False)
    inst = grouped.agg(name=("name", "first"), input_shapes=("input_shapes", "first"),
                       module=("module", "first"), device_us=("device_us", "sum"))
    inst = inst.reset_index()
    inst["key"] = keys.ids(inst, side)
    inst["input_shapes"] = keys.table["input_shapes"].to_numpy()[inst["key"].to_numpy()]
    return inst


def _samples(inst: pd.DataFrame, frame: pd.DataFrame, row_keys: np.ndarray) -> pd.DataFrame:
    """Instances to judge: the linked ones, and the unlinked kernels as one per unit."""
    lone = (frame["name"] == UNLINKED).to_numpy()
    unlinked = frame[lone].assign(key=row_keys[lone]).groupby(
        ["rank", "step", "key"], observed=True, dropna=False)["device_us"].sum().reset_index()
    columns = ["key", "rank", "step", "device_us"]
    return pd.concat([inst[columns], unlinked[columns]], ignore_index=True)


def _collective(frame: pd.DataFrame, row_keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key, whether every kernel it launched on this side is a collective."""
    comm = frame["kernel_type"].astype(str).isin(COMM_KERNEL_TYPES).to_numpy()
    rows = np.bincount(row_keys, minlength=n_keys)
    return (rows > 0) & (np.bincount(row_keys, weights=comm, minlength=n_keys) == rows)


def _kernel_lists(frame: pd.DataFrame, row_keys: np.ndarray, n_keys: int, units: int) -> list:
    """Per key, [{type, count, device_us}] per step and rank, largest first."""
    table = frame.assign(key=row_keys).groupby(["key", "kernel_type"], observed=True).agg(
        count=("kernels", "sum"), device_us=("device_us", "sum")).reset_index()
    table = table.sort_values(["device_us", "kernel_type"], ascending=[False, True],
                              kind="mergesort")
    lists: list = [[] for _ in range(n_keys)]
    for key, kind, count, device_us in zip(table["key"], table["kernel_type"].astype(str),
                                           table["count"], table["device_us"]):
        lists[key].append({"type": kind, "count": round(float(count) / units, 6),
                           "device_us": float(device_us) / units})
    return lists


# ---------------------------------------------------------------- per operator, per module

def compare_operators(base: pd.DataFrame, new: pd.DataFrame, thresholds: Thresholds,
                      limits: Limits = DEFAULT_LIMITS, keys: PairedKeys | None = None
                      ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The per-operator table (FRAMEWORK_OP_FIELDS + OP_RULE_FIELDS), aligned instances, notes.

    ``keys``: the two frames' keys paired (``pair_keys``; made here when not given).
    """
    keys = pair_keys(base, new) if keys is None else keys
    n_keys = len(keys.table)
    inst_b, inst_n = _instances(base, keys, "base"), _instances(new, keys, "new")
    instances, notes = align_units(inst_b, inst_n, limits.max_align_edits)
    units = count_units(base), count_units(new)
    rows_b, rows_n = keys.ids(base, "base"), keys.ids(new, "new")
    per_instance = keys.table["match_kind"].isin(PER_INSTANCE_KINDS).to_numpy()
    collective = _collective(base, rows_b, n_keys) & _collective(new, rows_n, n_keys)
    judged = judge(_samples(inst_b, base, rows_b), _samples(inst_n, new, rows_n), n_keys,
                   units, per_instance, collective, thresholds)
    table = keys.table.join(judged)
    table["delta_us"] = table["new_device_us"] - table["base_device_us"]
    table["base_kernels"] = _kernel_lists(base, rows_b, n_keys, units[0])
    table["new_kernels"] = _kernel_lists(new, rows_n, n_keys, units[1])
    table = _by_move(table, ["name", "input_shapes"])
    return table[list(FRAMEWORK_OP_FIELDS + OP_RULE_FIELDS)], instances, notes


def compare_modules(base: pd.DataFrame, new: pd.DataFrame, thresholds: Thresholds,
                    keys: PairedKeys | None = None) -> pd.DataFrame | None:
    """Per module path (MODULE_FIELDS + MODULE_RULE_FIELDS); None when neither run has modules.

    A module's instance is one framework-op instance under it (``*_count``: ops per step),
    and the operator keys' rule judges them with two readings of "the same instances":
    a module holding an op paired by name only (other shapes) is ``reshaped``, and one
    whose ops changed their per-step counts (``mul`` + ``mm`` + ``add`` → one ``addmm``,
    or one op traded for another) is ``count-changed``, with the ratio of the mean op
    times; only a module running the same ops as often on both sides is tested per
    instance. Paths pair by their text; ``keys``: the operators' pairing (made here when
    not given).
    """
    if not ((base["module"] != "").any() or (new["module"] != "").any()):
        return None
    keys = pair_keys(base, new) if keys is None else keys
    inst = [_instances(base, keys, "base"), _instances(new, keys, "new")]
    names = pd.Index(sorted(set(inst[0]["module"].astype(str))
                            | set(inst[1]["module"].astype(str))))
    for side in inst:
        side["op_key"], side["key"] = side["key"], names.get_indexer(side["module"].astype(str))
    units = count_units(base), count_units(new)
    reshaped, mix_changed = _module_mix(inst[0], inst[1], len(names), keys, units)
    judged = judge(inst[0], inst[1], len(names), units, ~reshaped, np.zeros(len(names), bool),
                   thresholds, mix_changed)
    table = pd.DataFrame({"module": [m or NO_MODULE for m in names]}).join(judged)
    table["delta_us"] = table["new_device_us"] - table["base_device_us"]
    return _by_move(table, ["module"])[list(MODULE_FIELDS + MODULE_RULE_FIELDS)]


def _module_mix(base: pd.DataFrame, new: pd.DataFrame, n_modules: int, keys: PairedKeys,
                units: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per module: whether it holds an op paired by name only, and whether its ops' counts moved.

    ``base``/``new``: op instances with their module id (``key``) and paired operator key
    (``op_key``). Each (module, operator key) is counted per step as a key of its own; the
    module's mix changed when any of them is count-changed.
    """
    by_name = (keys.table["match_kind"] == "name").to_numpy()
    n_ops = len(keys.table)
    reshaped = np.zeros(n_modules, bool)
    for side in (base, new):
        reshaped[side["key"].to_numpy()[by_name[side["op_key"].to_numpy()]]] = True
    pair = [side["key"].to_numpy(np.int64) * n_ops + side["op_key"].to_numpy(np.int64)
            for side in (base, new)]
    ids, distinct = pd.factorize(np.concatenate(pair))
    moved = counts_differ(base.assign(key=ids[:len(base)]), new.assign(key=ids[len(base):]),
                          len(distinct), units)
    mix_changed = np.bincount(distinct // n_ops, weights=moved, minlength=n_modules) > 0
    return reshaped, mix_changed


def _by_move(table: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Largest |delta_us| first, then by name: a stable, deterministic order."""
    order = table.assign(_move=-table["delta_us"].abs()).sort_values(["_move", *names],
                                                                      kind="mergesort")
    return order.drop(columns="_move").reset_index(drop=True)


def _coverage_notes(run: Run) -> list[str]:
    """Share of the run's kernel time no framework op reaches, when it is not small."""
    frame = run.framework
    if frame is None:
        return []
    total = frame["device_us"].sum()
    lone = frame.loc[frame["name"] == UNLINKED, "device_us"].sum()
    if total > 0 and lone / total >= 0.05:
        return [f"{run.label}: {lone / total:.0%} of kernel time is linked to no framework "
                f"operator (shown as {UNLINKED})"]
    return []


def compare_framework(base: Run, new: Run, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                      limits: Limits = DEFAULT_LIMITS, step_delta_us: float | None = None
                      ) -> tuple[FrameworkComparison | None, Note | None]:
    """Compare two runs per framework operator; (None, why) when a run has no links.

    ``step_delta_us``: Δ Stage to explain (FrameworkSummary); by default the runs' own,
    the mean Stage over their (rank, step) rows.
    """
    for run in (base, new):
        if run.framework is None:
            note = run.framework_note
            why = note.text if note else f"no host→device links: {NO_LINKS}"
            # The reason names its rank directory first: a label that is that name once.
            named = note is not None and note.data.get("source") == run.label
            return None, Note(NO_FRAMEWORK_LINKS, why if named else f"{run.label}: {why}")
    keys = pair_keys(base.framework, new.framework)
    operators, instances, notes = compare_operators(base.framework, new.framework, thresholds,
                                                    limits, keys)
    modules = compare_modules(base.framework, new.framework, thresholds, keys)
    notes += [run.framework_note.text for run in (base, new) if run.framework_note]
    notes += _coverage_notes(base) + _coverage_notes(new)
    return FrameworkComparison(operators, modules, instances,
                               rollup(operators, modules, thresholds,
                                      base.vocab.framework_families),
                               summarize(base, new, step_delta_us),
                               tuple(Note("framework", text) for text in notes)), None
