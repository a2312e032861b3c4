"""report.json, derived from the model: scalars made JSON-safe, dataclasses by field order.

The schema is ``cann_diff/data/report.schema.json`` (JSON Schema 2020-12); ``SCHEMA`` is
the version every report.json names. The module is not called ``json``, so that nothing
here shadows the standard library's.
"""

from __future__ import annotations

import copyreg
import io
import json
import math
import pickle
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from ..schema import Note

SCHEMA = "cann-diff/1"


def json_schema() -> dict:
    """The JSON Schema (2020-12) of report.json: ``cann_diff/data/report.schema.json``."""
    text = resources.files("cann_diff").joinpath("data/report.schema.json").read_text("utf-8")
    return json.loads(text)


def clean(value: Any) -> Any:
    """Make a scalar JSON-safe: numpy scalars to Python, NaN/inf/NA to None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, (str, int)):
        return value
    try:
        return None if pd.isna(value) else value
    except (TypeError, ValueError):
        return value


def to_json(value: Any) -> Any:
    """A model object as JSON-ready data: dataclasses by field order, mappings, sequences.

    A ``Note`` is its sentence; an object with its own ``to_dict`` (the report, the memory
    section) lays itself out.
    """
    if isinstance(value, Note):
        return value.text
    if hasattr(value, "to_dict"):
        return to_json(value.to_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return fields_json(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return clean(value)


def fields_json(value: Any, leave_out: tuple[str, ...] = ()) -> dict:
    """A dataclass's fields, in order, as JSON-ready data."""
    return {f.name: to_json(getattr(value, f.name)) for f in fields(value)
            if f.name not in leave_out}


def frozen(mapping: Mapping | None) -> Mapping:
    """A read-only view of a mapping, nested mappings included."""
    return MappingProxyType({k: frozen(v) if isinstance(v, Mapping) else v
                             for k, v in (mapping or {}).items()})


class _Pickler(pickle.Pickler):
    """Pickles a ``frozen`` view as ``frozen`` of its items (a mappingproxy has no pickle)."""

    dispatch_table = {**copyreg.dispatch_table,
                      MappingProxyType: lambda view: (frozen, (dict(view),))}


def pickled(value: Any) -> bytes:
    """``value`` (a Report, say) as pickle bytes, its read-only views included.

    For a worker process; ``pickle.loads`` gives it back equal. Only this pickler knows
    the views: nothing changes how the rest of the process pickles a mappingproxy.
    """
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()
