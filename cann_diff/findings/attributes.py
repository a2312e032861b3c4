"""Findings on why operators changed: their kernels now run elsewhere, otherwise, on what.

From the attributes compared per key (compare/attributes.py; a change is a different
modal value holding at least half of the key's kernel time), five findings:

* ``aicpu-fallback`` — a key's kernels now run on AI_CPU, or keys only in new run there;
* ``kernel-changed`` — the implementation (kernel name) behind a key changed;
* ``placement-changed`` — fewer or more cores: block dim, mix block dim or core type
  (a move to AI_CPU is ``aicpu-fallback``'s);
* ``format-changed`` — the input formats changed, with the TransData / Cast time that
  appeared or vanished with it: the conversion keys whose first input is one of the
  changed keys' tensors (blocked layouts folded back to the plain tensor);
* ``dynamic-shape`` — the op state went static → dynamic.

Severity by the time at stake: ``medium`` when the keys' Δ (with the linked conversions)
is at least ``material_pct`` of the base step, else ``info``; an AI_CPU fallback that costs
that much and made the step slower is ``high``. Communication keys carry no attributes.
Each finding names its three largest keys by |Δ| with their values ("block dim 32 (12 of
13 kernels) → 16 (4 of 9 kernels)") and lists every key in ``data["keys"]``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import format as fmt
from ..compare import Comparison
from ..compare.attributes import LABELS, PLACEMENT
from ..vocab.shapes import match_shapes
from .base import Finding

AI_CPU = "AI_CPU"
CONVERSIONS = ("TransData", "Cast")  # the families a format change adds or removes
SHOWN = 3
ONE_SIDE = {"added": "only in new", "removed": "only in base"}


def _short(shapes) -> str:
    if not isinstance(shapes, str) or not shapes:
        return ""
    return f" [{shapes if len(shapes) <= 30 else shapes[:29] + '…'}]"


def _name(row: pd.Series) -> str:
    shapes = row["input_shapes"] or row.get("base_input_shapes") or ""
    return f"{row['op_type']}{_short(shapes)}"


def _support(table: pd.DataFrame, key: int, side: str, attribute: str) -> str:
    """``32 (12 of 13 kernels)``: the modal value and the kernels it covers."""
    value = table.at[key, f"{side}_{attribute}"]
    count, kernels = (table.at[key, f"{side}_{attribute}_{p}"] for p in ("count", "kernels"))
    if attribute in ("input_formats", "input_dtypes"):
        value = "/".join(dict.fromkeys(str(value).split(";")))
    if count == kernels:
        return f"{value} ({int(kernels)} kernel{'s' if kernels != 1 else ''})"
    return f"{value} ({int(count)} of {int(kernels)} kernels)"


def _change(table: pd.DataFrame, key: int, attribute: str) -> str:
    return (f"{LABELS[attribute]} {_support(table, key, 'base', attribute)} → "
            f"{_support(table, key, 'new', attribute)}")


def _rows(cmp: Comparison, keys) -> pd.DataFrame:
    """The operator rows of ``keys``, largest |Δ| first (ties in table order)."""
    rows = cmp.operators[cmp.operators["key_id"].isin(list(keys)).to_numpy()]
    order = np.argsort(-rows["delta_us"].abs().to_numpy(), kind="stable")
    return rows.iloc[order].set_index("key_id", drop=False)


def _severity(cmp: Comparison, delta_us: float, worse_high: bool = False) -> str:
    material = abs(delta_us) >= cmp.thresholds.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    if material and worse_high and delta_us > 0:
        return "high"
    return "medium" if material else "info"


def _listed(cmp: Comparison, rows: pd.DataFrame, attributes: tuple[str, ...]) -> str:
    """The largest keys with their changed ``attributes`` and Δ, ``; ``-separated."""
    table = cmp.attributes.table
    shown = []
    for key, row in rows.head(SHOWN).iterrows():
        names = [a for a in attributes if a in table.at[key, "changed"]]
        what = ", ".join(_change(table, key, a) for a in names)
        shown.append(f"{_name(row)} {what} ({fmt.ms(row['delta_us'], signed=True)} ms)")
    more = f"; and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return "; ".join(shown) + more


def _changed_keys(cmp: Comparison, attributes: tuple[str, ...], base: str | None = None,
                  new: str | None = None) -> pd.Index:
    """Keys on both sides, not communication, with any of ``attributes`` changed.

    ``base`` / ``new``: only changes from / to that modal value.
    """
    changes = cmp.attributes.changes
    held = changes["attribute"].isin(attributes).to_numpy()
    if base is not None:
        held = held & (changes["base"] == base).to_numpy()
    if new is not None:
        held = held & (changes["new"] == new).to_numpy()
    keys = changes.loc[held, "key_id"].unique()
    ops = cmp.operators
    collective = ops.loc[(ops["category"] == "communication").to_numpy(), "key_id"]
    return pd.Index(keys[~np.isin(keys, collective.to_numpy())])


def _device_note(cmp: Comparison) -> str:
    device = next((c for c in cmp.comparability if c.what == "device"), None)
    return (f" The device differs too ({device.base.split(' (')[0]} → "
            f"{device.new.split(' (')[0]}): core types and block dims follow the chip."
            if device else "")


def _data(rows: pd.DataFrame, extra: dict | None = None) -> dict:
    return {"keys": [int(k) for k in rows["key_id"]],
            "delta_us": float(rows["delta_us"].sum()), **(extra or {})}


def aicpu_fallback(cmp: Comparison) -> Finding | None:
    """Keys whose kernels now run on AI_CPU, and keys only in new that run there."""
    table, ops = cmp.attributes.table, cmp.operators
    moved = _changed_keys(cmp, ("core",), new=AI_CPU).tolist()  # changed: base is not
    core = ops["key_id"].map(table["new_core"]) if "new_core" in table else \
        pd.Series(None, index=ops.index, dtype=object)
    on_cpu = core.eq(AI_CPU) | (core.isna() & (ops["category"] == "aicpu"))
    added = ops.loc[(ops["base_instances"] == 0) & on_cpu, "key_id"].tolist()
    if not moved and not added:
        return None
    rows = _rows(cmp, [*moved, *added])
    delta = float(rows["delta_us"].sum())
    shown = []
    for key, row in rows.head(SHOWN).iterrows():
        how = _change(table, key, "core") if key in moved else "only in new"
        shown.append(f"{_name(row)} {how} ({fmt.ms(row['delta_us'], signed=True)} ms)")
    more = f"; and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return Finding("aicpu-fallback", _severity(cmp, delta, worse_high=True),
                   f"{len(rows)} operator key(s) now run on AI_CPU",
                   f"{'; '.join(shown)}{more}. AI_CPU kernels run on the device's CPU cores, "
                   f"the fallback when no AI Core kernel takes the op's dtype, shape or "
                   f"state: {fmt.ms(rows['new_total_us'].sum())} ms per step on AI_CPU in "
                   f"new ({fmt.ms(delta, signed=True)} ms).", delta,
                   _data(rows, {"moved": [int(k) for k in moved],
                                "only_in_new": [int(k) for k in added]}))


def kernel_changed(cmp: Comparison) -> Finding | None:
    """Keys whose implementation (kernel name) changed, with the time they carry."""
    keys = _changed_keys(cmp, ("implementation",))
    if not len(keys):
        return None
    rows = _rows(cmp, keys)
    delta = float(rows["delta_us"].sum())
    return Finding("kernel-changed", _severity(cmp, delta),
                   f"{len(rows)} operator key(s) run another kernel implementation",
                   f"Largest: {_listed(cmp, rows, ('implementation',))}. They carry "
                   f"{fmt.ms(rows['base_total_us'].sum())} → "
                   f"{fmt.ms(rows['new_total_us'].sum())} ms per step "
                   f"({fmt.ms(delta, signed=True)} ms): the operator is served by another "
                   "kernel of the library.", delta, _data(rows))


def placement_changed(cmp: Comparison) -> Finding | None:
    """Keys on other cores (block dim, mix block dim) or another core type, not AI_CPU."""
    keys = _changed_keys(cmp, PLACEMENT)
    keys = keys[~keys.isin(_changed_keys(cmp, ("core",), new=AI_CPU))]
    if not len(keys):
        return None
    rows = _rows(cmp, keys)
    delta = float(rows["delta_us"].sum())
    return Finding("placement-changed", _severity(cmp, delta),
                   f"{len(rows)} operator key(s) run on other cores",
                   f"Largest: {_listed(cmp, rows, PLACEMENT)}. "
                   f"Block dim is the number of cores a kernel is split over: fewer cores "
                   f"leave the others idle, more add start-up and synchronization "
                   f"({fmt.ms(delta, signed=True)} ms per step on these keys)."
                   f"{_device_note(cmp)}", delta, _data(rows))


def _tensors(shapes: pd.Series) -> set[str]:
    """The plain tensors of ``;``/``/``/``→``-joined shapes (blocked layouts folded)."""
    text = shapes.fillna("").astype(str).str.replace("→", ";").str.replace("/", ";")
    tensors = pd.Series(sorted({t for value in text for t in value.split(";") if t}),
                        dtype=object)
    if tensors.empty:
        return set()
    plain = match_shapes(pd.Series("", index=tensors.index), tensors, 0)["match_shapes"]
    return {*tensors, *plain}


def conversions(cmp: Comparison, keys) -> pd.DataFrame:
    """TransData / Cast keys that came or went with ``keys``' formats.

    Those that appeared, vanished, changed count or shape, whose first input is a tensor
    of ``keys`` (blocked layouts folded on both sides).
    """
    ops = cmp.operators
    changed = ops[ops["key_id"].isin(list(keys))]
    tensors = _tensors(pd.concat([changed["base_input_shapes"], changed["new_input_shapes"],
                                  changed["input_shapes"]]))
    candidates = ops[ops["family"].astype(str).isin(CONVERSIONS)
                     & ops["status"].isin(("added", "removed", "count-changed", "reshaped"))]
    if candidates.empty or not tensors:
        return candidates.iloc[0:0]
    first = candidates["input_shapes"].fillna("").astype(str).str.split(";").str[0]
    plain = match_shapes(pd.Series("", index=first.index), first, 0)["match_shapes"]
    return candidates[first.isin(tensors) | plain.isin(tensors)]


def format_changed(cmp: Comparison) -> Finding | None:
    """Keys whose input formats changed, and the conversions that came or went with them."""
    keys = _changed_keys(cmp, ("input_formats",))
    # A conversion's input format is what it converts from: it is said as a conversion.
    ops = cmp.operators
    conversion = ops.loc[ops["family"].astype(str).isin(CONVERSIONS).to_numpy(), "key_id"]
    keys = keys[~keys.isin(conversion.to_numpy())]
    if not len(keys):
        return None
    rows = _rows(cmp, keys)
    linked = conversions(cmp, keys)
    linked = linked.loc[linked["delta_us"].abs().sort_values(ascending=False,
                                                             kind="stable").index]
    converted = float(linked["delta_us"].sum())
    delta = float(rows["delta_us"].sum()) + converted
    named = ", ".join(f"{_name(r)} {ONE_SIDE.get(r['status'], r['status'])} "
                      f"({fmt.ms(r['delta_us'], signed=True)} ms)"
                      for _, r in linked.head(SHOWN).iterrows())
    with_it = (f" The {'/'.join(CONVERSIONS)} kernels of their tensors that appeared or "
               f"vanished with it: {fmt.ms(converted, signed=True)} ms per step ({named}"
               f"{'; and more' if len(linked) > SHOWN else ''})." if len(linked) else
               f" No {'/'.join(CONVERSIONS)} kernel of their tensors appeared or vanished.")
    return Finding("format-changed", _severity(cmp, delta),
                   f"{len(rows)} operator key(s) take other input formats",
                   f"Largest: {_listed(cmp, rows, ('input_formats',))}.{with_it}", delta,
                   _data(rows, {"conversion_keys": [int(k) for k in linked["key_id"]],
                                "conversion_us": converted,
                                "keys_delta_us": float(rows["delta_us"].sum())}))


def dynamic_shape(cmp: Comparison) -> Finding | None:
    """Keys whose op state went static → dynamic."""
    keys = _changed_keys(cmp, ("op_state",), base="static", new="dynamic")
    if not len(keys):
        return None
    rows = _rows(cmp, keys)
    delta = float(rows["delta_us"].sum())
    return Finding("dynamic-shape", _severity(cmp, delta),
                   f"{len(rows)} operator key(s) now run dynamic-shape kernels",
                   f"Largest: {_listed(cmp, rows, ('op_state',))}. A dynamic-shape kernel is "
                   "compiled for any shape and tiles at run time, where a static one was "
                   f"built for its shape ({fmt.ms(delta, signed=True)} ms per step on these "
                   "keys).", delta, _data(rows))


def attribute_findings(cmp: Comparison) -> list[Finding]:
    """The five findings on why operators changed, those that apply."""
    if not cmp.attributes.recorded and not (cmp.operators["category"] == "aicpu").any():
        return []
    found = (aicpu_fallback(cmp), kernel_changed(cmp), placement_changed(cmp),
             format_changed(cmp), dynamic_shape(cmp))
    return [f for f in found if f is not None]
