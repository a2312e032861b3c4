"""The user's ``--fusion-map`` and ``--alias-map`` files, read into one Vocabulary.

They are inputs like any profile: a FIFO, deep nesting or a non-object is refused with
the file named (exit 2).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..errors import InputError
from ..vocab import Vocabulary, default_vocabulary
from .formats.files import check_depth, json_problem, read_bytes


def read_map(path: Path) -> dict:
    """A user map file as a JSON object."""
    raw = read_bytes(Path(path))
    check_depth(Path(path), raw)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise InputError(path, f"cannot read JSON map: {json_problem(exc)}") from None
    if not isinstance(data, dict):
        raise InputError(path, "a map must be a JSON object")
    return data


@lru_cache(maxsize=8)
def load_vocabulary(fusion_map: Path | None = None,
                    alias_map: Path | None = None) -> Vocabulary:
    """The package tables extended by the user's maps (None: not given); once per pair."""
    if fusion_map is None and alias_map is None:
        return default_vocabulary()
    return Vocabulary.build(None if fusion_map is None else read_map(fusion_map),
                            None if alias_map is None else read_map(alias_map),
                            None if fusion_map is None else str(fusion_map),
                            None if alias_map is None else str(alias_map))
