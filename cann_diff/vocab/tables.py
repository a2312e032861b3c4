"""The tables behind the vocabulary: MC2 fused operators, renamed kernels, family aliases.

The package ships ``fusion_map.json``, ``renames.json``, ``aliases.json`` and
``framework_families.json`` in ``cann_diff/data``; a user map adds entries in the same
layout (an alias map entry whose name holds ``::`` names a framework operator's family).
An entry that does not fit the layout is an InputError naming the file it came from.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources

from ..errors import InputError


@dataclass(frozen=True)
class FusedOp:
    """One MC2 fused operator and what it becomes when run split (docs/formats.md §9.5)."""

    fused_type: str
    split: tuple[str, ...]
    compute: tuple[str, ...]
    comm: tuple[str, ...]
    api: str
    min_cann: str | None
    enable: str


@dataclass(frozen=True)
class Rename:
    """A kernel type CANN replaced (renames.json): its successors and the family both share."""

    old_type: str
    successors: tuple[str, ...]
    family: str
    set_aside_inputs: tuple[int, ...]
    source: str


def package_map(name: str) -> dict:
    """One of the package's JSON tables (``cann_diff/data/<name>``)."""
    text = resources.files("cann_diff").joinpath("data").joinpath(name).read_text("utf-8")
    return json.loads(text)


def _entries(raw: dict) -> dict:
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def fusion_entries(raw: dict, source: str | None) -> dict[str, FusedOp]:
    """The fused operators of a fusion map (``source`` names its file in an error)."""
    table = {}
    for name, spec in _entries(raw).items():
        try:
            table[name] = FusedOp(name, tuple(spec["split"]), tuple(spec.get("compute", ())),
                                  tuple(spec.get("comm", ())), spec.get("api", ""),
                                  spec.get("min_cann"), spec.get("enable", ""))
        except (KeyError, TypeError):
            raise InputError(source, f"fusion map entry {name!r} needs a 'split' list") from None
    return table


def _rename(source: str | None, old_type: str, spec: dict) -> Rename:
    successors = spec.get("to", ())
    successors = (successors,) if isinstance(successors, str) else successors
    set_aside = spec.get("set_aside_inputs", ())
    family = spec.get("family")
    valid = (isinstance(family, str) and family
             and isinstance(successors, (list, tuple))
             and all(isinstance(s, str) for s in successors)
             and isinstance(set_aside, (list, tuple))
             and all(isinstance(i, int) and i >= 0 for i in set_aside))
    if not valid:
        raise InputError(source, f"rename entry {old_type!r} needs a 'family' string, 'to' "
                                 "type(s) and 'set_aside_inputs' as input positions (0, 1, …)")
    return Rename(old_type, tuple(successors), str(family), tuple(set_aside),
                  str(spec.get("source", "")))


def rename_entries(raw: dict, source: str | None) -> dict[str, Rename]:
    """The renames of a map: its object entries (a string entry is a family alias)."""
    return {name: _rename(source, name, spec) for name, spec in _entries(raw).items()
            if isinstance(spec, dict)}


def version_free(op_type: str) -> str:
    """A type without its trailing version (``MatMulV3`` → ``MatMul``), as families start."""
    return re.sub(r"V\d+$", "", op_type)


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """The fusion table, the renames and the family aliases in force for one comparison.

    ``key`` names the user maps it was built with (None: the package's own); memos of
    derived names are kept per key. The mappings are read, never changed.
    """

    fusion: dict[str, FusedOp]
    renames: dict[str, Rename]
    aliases: dict[str, str]
    key: tuple[str | None, str | None] = (None, None)
    # Framework operator name (``aten::add_``) -> family of the roll-up (``add``).
    framework_families: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, fusion_extra: dict | None = None, alias_extra: dict | None = None,
              fusion_source: str | None = None, alias_source: str | None = None
              ) -> Vocabulary:
        """The package tables, extended by a user fusion map and alias map (parsed JSON).

        Aliases: the renames' families first, then aliases.json, then the string entries
        of the user's alias map; renames: renames.json, then its object entries; framework
        families: framework_families.json, then the alias map's ``::`` entries.
        """
        fusion = fusion_entries(package_map("fusion_map.json"), None)
        if fusion_extra is not None:
            fusion.update(fusion_entries(fusion_extra, fusion_source))
        renames = rename_entries(package_map("renames.json"), None)
        if alias_extra is not None:
            renames.update(rename_entries(alias_extra, alias_source))
        aliases = {version_free(r.old_type): r.family for r in renames.values()}
        raw = _entries(package_map("aliases.json"))
        if alias_extra is not None:
            raw.update(_entries(alias_extra))
        aliases.update({k: v for k, v in raw.items() if isinstance(v, str)})
        families = {name: family
                    for family, names in _entries(package_map("framework_families.json")).items()
                    for name in names}
        families.update({k: v for k, v in _entries(alias_extra or {}).items()
                         if "::" in k and isinstance(v, str)})
        return cls(fusion, renames, aliases, (fusion_source, alias_source), families)


@lru_cache(maxsize=1)
def default_vocabulary() -> Vocabulary:
    """The package's own tables, built once per process."""
    return Vocabulary.build()
