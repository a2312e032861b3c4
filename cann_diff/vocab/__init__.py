"""The vocabulary every stage speaks: operator names, families, renames, MC2 fusion.

Canonical names, families, communication types and the MC2 fusion table live here. A
``Vocabulary`` is built once per comparison from the package tables (``cann_diff/data``)
and the user's ``--fusion-map`` / ``--alias-map`` (read by ``read/maps.py``), and handed
to whoever needs it: the readers' normalization, the match ladder, the fusion finding.
It is plain data, so it pickles to worker processes. Nothing here reads a profile, and
no module here imports a stage.
"""

from __future__ import annotations

from .tables import FusedOp, Rename, Vocabulary, default_vocabulary, version_free

__all__ = ["FusedOp", "Rename", "Vocabulary", "default_vocabulary", "version_free"]
