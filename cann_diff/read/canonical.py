"""Canonical operator names: the normalize stage shared by every reader.

Names are derived once per distinct (name, type, core) triple and mapped back to
rows, so the cost grows with the number of distinct kernels, not with rows.
Rules: DESIGN.md "Canonical operators" and FORMATS.md §5.3, §9.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

MISSING = {"", "N/A", "NA", "NAN", "NONE", "NULL"}

COMM_TYPES = {
    "allreduce": "AllReduce",
    "allgather": "AllGather",
    "allgatherv": "AllGatherV",
    "reducescatter": "ReduceScatter",
    "reducescatterv": "ReduceScatterV",
    "broadcast": "Broadcast",
    "alltoall": "AllToAll",
    "alltoallv": "AllToAllV",
    "alltoallvc": "AllToAllVC",
    "send": "Send",
    "receive": "Receive",
    "batchsendrecv": "BatchSendRecv",
    "reduce": "Reduce",
    "scatter": "Scatter",
    "barrier": "Barrier",
}
COMM_CORES = {"HCCL", "COMMUNICATION", "COMM"}
CORE_ALIASES = {"HCCL": "COMM", "COMMUNICATION": "COMM", "N/A": "UNKNOWN", "": "UNKNOWN"}
MEMCPY_TYPES = {"MEMCPY_ASYNC", "MEMCPYASYNC", "MEMCPY", "MEMCPY_H2D", "MEMCPY_D2H"}


@dataclass(frozen=True)
class FusedOp:
    """One MC2 fused operator and what it becomes when run split (FORMATS.md §9.5)."""

    fused_type: str
    split: tuple[str, ...]
    compute: tuple[str, ...]
    comm: tuple[str, ...]
    api: str
    min_cann: str | None
    enable: str


def _load_json(path: Path | None, package_file: str) -> dict:
    if path is None:
        data_dir = resources.files("cann_diff").joinpath("data")
        text = data_dir.joinpath(package_file).read_text("utf-8")
        return json.loads(text)
    from .files import check_depth, json_problem, read_bytes  # a FIFO or deep nesting: refused

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
def fusion_table(extra: Path | None = None) -> dict[str, FusedOp]:
    """Return the MC2 table (package data plus an optional user file), keyed by fused type."""
    raw = _load_json(None, "fusion_map.json")
    if extra is not None:
        raw.update(_load_json(extra, "fusion_map.json"))
    table = {}
    for name, spec in raw.items():
        if name.startswith("_"):
            continue
        try:
            table[name] = FusedOp(name, tuple(spec["split"]), tuple(spec.get("compute", ())),
                                  tuple(spec.get("comm", ())), spec.get("api", ""),
                                  spec.get("min_cann"), spec.get("enable", ""))
        except (KeyError, TypeError):
            raise InputError(extra, f"fusion map entry {name!r} needs a 'split' list") from None
    return table


@dataclass(frozen=True)
class Rename:
    """A kernel type CANN replaced (renames.json): its successors and the family both share."""

    old_type: str
    successors: tuple[str, ...]
    family: str
    set_aside_inputs: tuple[int, ...]
    source: str


def _rename(path: Path | None, old_type: str, spec: dict) -> Rename:
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
        raise InputError(path, f"rename entry {old_type!r} needs a 'family' string, 'to' "
                               "type(s) and 'set_aside_inputs' as input positions (0, 1, …)")
    return Rename(old_type, tuple(successors), str(family), tuple(set_aside),
                  str(spec.get("source", "")))


@lru_cache(maxsize=8)
def rename_table(extra: Path | None = None) -> dict[str, Rename]:
    """Return the renames (package renames.json plus object entries of an --alias-map file)."""
    table = {name: _rename(None, name, spec)
             for name, spec in _load_json(None, "renames.json").items()
             if not name.startswith("_")}
    if extra is not None:
        user = _load_json(extra, "aliases.json")
        table.update({name: _rename(extra, name, spec) for name, spec in user.items()
                      if not name.startswith("_") and isinstance(spec, dict)})
    return table


def version_free(op_type: str) -> str:
    """A type without its trailing version (``MatMulV3`` → ``MatMul``), as families start."""
    return re.sub(r"V\d+$", "", op_type)


@lru_cache(maxsize=8)
def alias_table(extra: Path | None = None) -> dict[str, str]:
    """Return family aliases: renames, then aliases.json, then string entries of a user file."""
    aliases = {version_free(r.old_type): r.family for r in rename_table(extra).values()}
    raw = _load_json(None, "aliases.json")
    if extra is not None:
        raw.update(_load_json(extra, "aliases.json"))
    aliases.update({k: v for k, v in raw.items() if not k.startswith("_") and isinstance(v, str)})
    return aliases


def _comm_type(base_lower: pd.Series) -> pd.Series:
    """Communication type from a lower-cased name without ``@group`` (empty if none)."""
    stripped = base_lower.str.replace("_aicpukernel", "", regex=False)
    token = stripped.str.extract(r"^(?:hcom_|hccl)([a-z]+)(?:_|$)", expand=False)
    return token.map(COMM_TYPES).fillna("")


def _type_from_name(base: pd.Series) -> pd.Series:
    """Kernel type derived from its name when ``Type`` is missing (Level0 exports)."""
    aclnn = base.str.startswith("aclnn")
    # Graph names carry instance numbers ("ReduceSum7", "trans_TransData_17",
    # "atomic_memset-1_18_186609_1"); a versioned type keeps its first version digit
    # ("MatMulV21" is MatMulV2 #1).
    graph = base.str.replace(r"(?:[_-]?\d+)+$", "", regex=True)
    versioned = graph.str.endswith("V") & base.str.match(r".*V\d\d+$")
    graph = graph.where(~versioned, base.str.replace(r"(V\d)\d+$", r"\1", regex=True))
    derived = graph.where(~aclnn, base).str.split(r"[_-]", regex=True).str[-1]
    return derived.where(derived.str.len() > 0, base)


DERIVED_COLUMNS = ("op_type_raw", "op_type", "family", "comm_type", "category", "core")
# The canonical columns of each (name, type, core) seen in this process, per (fusion map,
# alias map): every rank of a job runs the same kernels, so a rank after the first derives
# almost nothing. Bounded, for a library user who reads many unrelated profiles.
_KNOWN_NAMES: dict[tuple[Path | None, Path | None], dict[tuple[str, str, str], tuple]] = {}
KNOWN_NAMES_LIMIT = 200_000


def _as_text(values: pd.Series) -> pd.Series:
    return values.astype(str).fillna("")


def canonical_names(
    names: pd.Series, types: pd.Series, cores: pd.Series,
    fusion_map: Path | None = None, alias_map: Path | None = None,
) -> pd.DataFrame:
    """Derive canonical columns for distinct (name, type, core) rows.

    Returns a frame aligned with the inputs holding ``op_type_raw``, ``op_type``,
    ``family``, ``comm_type``, ``category`` and ``core``. Each row depends on its own
    (name, type, core) alone, so the rows are derived once per process
    (``_KNOWN_NAMES``) and only the triples not seen before go through the rules.
    """
    if not len(names):
        return _derive_names(names, types, cores, fusion_map, alias_map)
    names, types, cores = _as_text(names), _as_text(types), _as_text(cores)
    rows = _canonical_rows(list(zip(names.tolist(), types.tolist(), cores.tolist())),
                           fusion_map, alias_map)
    return pd.DataFrame(dict(zip(DERIVED_COLUMNS, (list(c) for c in zip(*rows)))),
                        index=names.index)


_DIGITS = re.compile(r"\d+")
# The communication type of each collective name seen in this process, digits folded.
_COMM_TYPES: dict[str, str] = {}


def comm_types(op_names: list[str]) -> list[str]:
    """Canonical communication type (``AllReduce`` …) of each communication op name.

    Digits (op index, group counters) never decide the type: they are folded first, and
    each folded name goes through ``canonical_names`` once per process.
    """
    def derive(unseen: list[str]) -> list[str]:
        names = pd.Series(unseen, dtype=object)
        return canonical_names(names, names, pd.Series("COMM", index=names.index)
                               )["op_type"].tolist()

    return _through_memo(_COMM_TYPES, [_DIGITS.sub("", name) for name in op_names], derive)


def _canonical_rows(keys: list[tuple[str, str, str]], fusion_map: Path | None,
                    alias_map: Path | None) -> list[tuple]:
    """The canonical columns of each (name, type, core) text triple, through the memo."""
    def derive(unseen: list) -> list[tuple]:
        names, types, cores = (pd.Series(list(part), dtype=str) for part in zip(*unseen))
        derived = _derive_names(names, types, cores, fusion_map, alias_map)
        return list(zip(*(derived[c].tolist() for c in DERIVED_COLUMNS)))

    return _through_memo(_KNOWN_NAMES.setdefault((fusion_map, alias_map), {}), keys, derive)


def _through_memo(known: dict, keys: list, derive: Callable[[list], list]) -> list:
    """``derive``'s value for each key, asking it only for the keys ``known`` lacks.

    ``known`` is emptied first when it would grow past ``KNOWN_NAMES_LIMIT``.
    """
    unseen = list(dict.fromkeys(key for key in keys if key not in known))
    if len(known) + len(unseen) > KNOWN_NAMES_LIMIT:
        known.clear()
        unseen = list(dict.fromkeys(keys))
    if unseen:
        known.update(zip(unseen, derive(unseen)))
    return [known[key] for key in keys]


def _derive_names(names: pd.Series, types: pd.Series, cores: pd.Series,
                  fusion_map: Path | None, alias_map: Path | None) -> pd.DataFrame:
    """The rules of ``canonical_names``, vectorized over the rows given."""
    name = names.astype(str).fillna("")
    base = name.str.split("@").str[0]
    lower = base.str.lower()
    raw_type = types.astype(str).fillna("").str.strip()
    type_missing = raw_type.str.upper().isin(MISSING)
    core = cores.astype(str).fillna("").str.strip().str.upper()
    core = core.map(lambda c: CORE_ALIASES.get(c, c))

    comm = _comm_type(lower)
    comm = comm.where(comm != "", _comm_type(raw_type.str.lower()))
    is_comm = (comm != "") | core.isin(COMM_CORES)

    op_type_raw = raw_type.where(~type_missing, _type_from_name(base))
    op_type_raw = op_type_raw.where(~(type_missing & (comm != "")), comm)
    table = fusion_table(fusion_map)
    fused_by_lower = {k.lower(): k for k in table}
    fused_by_lower.update({f"{k.lower()}aicpu": k for k in table})
    fused = op_type_raw.str.lower().map(fused_by_lower)
    # Only the kernel's own type or name: an MC2 API also launches helper kernels
    # (aclnnMatmulAllReduce_TransposeAiCore_Transpose) that are not the fused op.
    fused = fused.fillna(base.str.lower().map(fused_by_lower))
    is_mc2 = fused.notna()
    # The comm-stream companion (<Fused>Aicpu) keeps its own type but the fused family.
    companion = is_mc2 & (op_type_raw.str.lower().str.endswith("aicpu")
                          | base.str.lower().str.endswith("aicpu"))

    op_type = op_type_raw.where(~is_comm, comm.where(comm != "", "Communication"))
    op_type = op_type.where(~is_mc2, fused.where(~companion, fused + "Aicpu"))
    aliases = alias_table(alias_map)
    family = op_type.str.replace(r"V\d+$", "", regex=True)
    family = family.map(lambda f: aliases.get(f, f))
    family = family.where(~is_comm, op_type).where(~is_mc2, fused)

    upper_type = op_type_raw.str.upper()
    category = pd.Series("compute", index=names.index)
    category = category.mask(core == "AI_CPU", "aicpu")
    category = category.mask(upper_type.isin(MEMCPY_TYPES) | lower.str.contains("memcpy"), "memcpy")
    category = category.mask(is_comm, "communication")
    category = category.mask(is_mc2, "mc2")
    core = core.mask(is_comm & ~is_mc2, "COMM")
    return pd.DataFrame({
        "op_type_raw": op_type_raw, "op_type": op_type, "family": family,
        "comm_type": comm.where(is_comm & ~is_mc2, ""), "category": category, "core": core,
    })


def normalize_shapes(values: pd.Series) -> pd.Series:
    """Shapes as ``d,d;d,d``: quotes, blanks and ``N/A`` removed."""
    text = values.astype(str).str.replace('"', "", regex=False).str.replace(" ", "", regex=False)
    return text.where(~text.str.upper().isin(MISSING), "")


def normalize_dtypes(values: pd.Series) -> pd.Series:
    """Dtypes upper-cased with the ``DT_`` prefix dropped (``DT_BF16`` ≡ ``BF16``)."""
    text = normalize_shapes(values).str.upper()
    return text.str.replace(r"(^|;)DT_", r"\1", regex=True)


# C0, the innermost block of Ascend's blocked layouts, is 32 bytes: 8 fp32, 16 fp16/bf16,
# 32 int8 elements. One stack may block by 16 where another blocks by 8 (FORMATS.md §5.3).
BLOCK_C0 = frozenset({8, 16, 32})
FRACTAL_ROWS = 16  # the fixed 16 of FRACTAL_Z / FRACTAL_NZ blocks


def _unblocked(tensor: str) -> str:
    """One tensor's shape with the C0 block folded out, so C0 16 and C0 8 compare equal.

    5-D ``N,C1,H,W,C0`` (NC1HWC0) → ``N,C,H,W`` with C = C1·C0 rounded up to 32 (a padded
    channel count, the same whichever C0 divided it); 4-D and ≥ 6-D ``…,A,B,16,C0``
    (FRACTAL_Z, FRACTAL_NZ) → ``…,B·16,A·C0``, the matrix the blocks tile. Anything else,
    and ND shapes that do not end in a C0, stay as they are.
    """
    parts = tensor.split(",")
    if len(parts) < 4 or not all(p.isdigit() for p in parts):
        return tensor
    dims = [int(p) for p in parts]
    c0 = dims[-1]
    if c0 not in BLOCK_C0:
        return tensor
    if len(dims) == 5:
        n, c1, h, w, _ = dims
        channels = -(-c1 * c0 // 32) * 32
        return f"{n},{channels},{h},{w}"
    if dims[-2] != FRACTAL_ROWS:
        return tensor
    *lead, a, b, _, _ = dims
    return ",".join(str(d) for d in (*lead, b * FRACTAL_ROWS, a * c0))


def _is_attribute_input(tensor: str, max_elements: int) -> bool:
    """A 0-D input (``""``) or a 1-D one of at most ``max_elements`` values: axes, sizes, k."""
    return tensor == "" or (tensor.isdigit() and int(tensor) <= max_elements)


def _match_form(op_type: str, shapes: str, max_elements: int,
                renames: dict[str, Rename]) -> tuple[str, str]:
    if not shapes:
        return "", ""
    tensors = shapes.split(";")
    rename = renames.get(op_type)
    if rename is not None and rename.set_aside_inputs:
        dropped = set(rename.set_aside_inputs)
        kept = [t for i, t in enumerate(tensors) if i not in dropped]
        tensors = kept or tensors
    attribute = [_is_attribute_input(t, max_elements) for t in tensors]
    if all(attribute):  # an op's only inputs are its data, however small
        attribute = [False] * len(tensors)
    data = ";".join(_unblocked(t) for t, a in zip(tensors, attribute) if not a)
    attributes = "".join(f"<{t}>" for t, a in zip(tensors, attribute) if a)
    return data, attributes


def match_shapes(op_types: pd.Series, shapes: pd.Series, max_elements: int,
                 alias_map: Path | None = None) -> pd.DataFrame:
    """Shapes for matching across stacks, beside the displayed ``input_shapes``.

    Returns ``match_shapes`` — the data inputs, with the rename table's
    ``set_aside_inputs`` dropped and C0 blocks folded out (``_unblocked``) — and
    ``attribute_inputs``: the small inputs newer kernels take in place of attributes
    (0-D, or 1-D of at most ``max_elements`` values), as ``<4><>``. The match stage
    pairs on ``match_shapes`` when one side has no attribute inputs or both have the same
    (DESIGN.md "Canonical operators"). One call per distinct (type, shapes) pair.
    """
    renames = rename_table(alias_map)
    forms = [_match_form(t, s, max_elements, renames)
             for t, s in zip(op_types.astype(str), shapes.astype(str))]
    data, attributes = zip(*forms) if forms else ((), ())
    return pd.DataFrame({"match_shapes": list(data), "attribute_inputs": list(attributes)},
                        index=op_types.index)


def _distinct_rows(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct value combinations of ``columns`` and, per row, the index of its combination.

    Category codes are folded into one int64 per row and hashed (pd.factorize), which
    is linear; np.unique(axis=0) sorted rows and was the slowest step at 1M rows.
    """
    cats = [frame[c].astype("category") for c in columns]
    if len(frame) == 0:
        return pd.DataFrame({c: pd.Series(dtype=str) for c in columns}), np.zeros(0, np.int64)
    combined = np.zeros(len(frame), dtype=np.int64)
    for cat in cats:  # codes + 1 so that a missing value (-1) gets its own slot
        combined = combined * (len(cat.cat.categories) + 1) + cat.cat.codes.to_numpy(np.int64) + 1
    inverse, unique = pd.factorize(combined)
    distinct = {}
    for column, cat in zip(reversed(columns), reversed(cats)):
        width = len(cat.cat.categories) + 1
        codes = unique % width - 1
        unique = unique // width
        labels = np.append(cat.cat.categories.astype(str).to_numpy(dtype=object), "")
        distinct[column] = labels[codes]  # code -1 (missing) picks the appended ""
    return pd.DataFrame({c: distinct[c] for c in columns}), inverse.astype(np.int64)


def expand(values: pd.Series | np.ndarray, inverse: np.ndarray) -> pd.Categorical:
    """Spread per-distinct values back to rows as a categorical, without object arrays."""
    codes, uniques = pd.factorize(values)
    return pd.Categorical.from_codes(codes[inverse], categories=pd.Index(uniques).astype(str))


def _fold_comm_digits(labels: pd.Series) -> pd.Series:
    """Collective names without digits (``hcom_allReduce__586_12_1`` → ``hcom_allReduce__``)."""
    is_comm = labels.str.lower().str.match(r"(?:hcom_|hccl)")
    return labels.where(~is_comm, labels.str.replace(r"\d+", "", regex=True))


def _labels_of(cat: pd.Series) -> list[str]:
    """A categorical's category names as text, then ``""`` for code -1 (missing)."""
    return [*cat.cat.categories.astype(str).tolist(), ""]


def canonicalize(frame: pd.DataFrame, fusion_map: Path | None = None,
                 alias_map: Path | None = None) -> pd.DataFrame:
    """Replace raw ``op_type_raw``/``core`` with the canonical name columns (categoricals).

    The rows' distinct (name, type, core) are taken on category codes, as
    ``_distinct_rows`` takes them, and named through the per-process memo of
    ``canonical_names``.
    """
    names = frame["op_name"].astype("category")
    # Every collective has its own name (hcom_allReduce__586_12_1); its digits never
    # decide the canonical columns, so fold them before taking distinct rows.
    folded = _memoized(_fold_comm_digits, names.cat.categories.astype(str).tolist())
    folded_codes, folded_labels = pd.factorize(pd.Series(folded, dtype=str))
    codes = names.cat.codes.to_numpy()
    key_codes = np.where(codes >= 0, folded_codes[codes] if len(folded) else -1, -1)
    columns = [(key_codes.astype(np.int64), [*pd.Index(folded_labels).astype(str).tolist(), ""])]
    for column in ("op_type_raw", "core"):
        cat = frame[column].astype("category")
        columns.append((cat.cat.codes.to_numpy(np.int64), _labels_of(cat)))
    out = frame.drop(columns=["op_type_raw", "core"])
    if len(frame) == 0:
        nothing = pd.Series(dtype=str)
        derived = _derive_names(nothing, nothing, nothing, fusion_map, alias_map)
        for column in derived.columns:
            out[column] = expand(derived[column], np.zeros(0, np.int64))
    else:
        combined = np.zeros(len(frame), dtype=np.int64)
        for column_codes, labels in columns:  # codes + 1: a missing value (-1) gets a slot
            combined = combined * len(labels) + column_codes + 1
        inverse, unique = pd.factorize(combined)
        keys = []
        for column_codes, labels in reversed(columns):
            width = len(labels)
            keys.append([labels[c - 1] for c in (unique % width).tolist()])
            unique = unique // width
        rows = _canonical_rows(list(zip(*reversed(keys))), fusion_map, alias_map)
        for position, column in enumerate(DERIVED_COLUMNS):
            out[column] = expand(np.array([row[position] for row in rows], dtype=object),
                                 inverse)
    out["op_name"] = names
    return out


# What each value-wise ``normalize_distinct`` function made of each text in this process.
_NORMALIZED: dict[Callable, dict[str, str]] = {}


def _memoized(func: Callable[[pd.Series], pd.Series], texts: list[str]) -> list[str]:
    """``func(pd.Series(texts))`` as a list, each text through ``func`` once per process."""
    return _through_memo(_NORMALIZED.setdefault(func, {}), texts,
                         lambda unseen: func(pd.Series(unseen, dtype=str)).tolist())


def normalize_distinct(values: pd.Series, func: Callable[[pd.Series], pd.Series]
                       ) -> pd.Categorical:
    """Apply a vectorized string ``func`` to the distinct values only; return a categorical.

    ``func`` maps each value on its own (it is asked once per distinct text and process).
    The categories come in the order the values first appear, as ``_distinct_rows`` and
    ``expand`` give them; a missing value counts as ``""``.
    """
    cats = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    codes = cats.cat.codes.to_numpy()
    inverse, first_seen = pd.factorize(codes)
    labels = cats.cat.categories.astype(str).tolist() + [""]  # code -1 (missing) picks ""
    normalized = _memoized(func, [labels[code] for code in first_seen.tolist()])
    return expand(np.array(normalized, dtype=object), inverse)


# Host↔device copy directions as op names and db enums spell them.
_LETTER_BEFORE, _LETTER_AFTER = r"(?<![A-Z])", r"(?![A-Z])"
_DIRECTION_PATTERNS = (
    ("host_to_device", r"H2D|HTOD|HOST_?TO_?DEVICE|HOST2DEVICE"),
    ("device_to_host", r"D2H|DTOH|DEVICE_?TO_?HOST|DEVICE2HOST"),
    ("device_to_device", r"D2D|DTOD|DEVICE_?TO_?DEVICE|DEVICE2DEVICE"),
)


def copy_direction(text: pd.Series, known: str = "unknown") -> pd.Series:
    """Copy direction named in free text (``MEMCPY_H2D``, ``Memcpy HtoD``, ``host to device``).

    Returns ``host_to_device``/``device_to_host``/``device_to_device``, else ``known``
    (``unknown`` for op names, ``other`` for a db operation that names another kind).
    Vectorized over the distinct values.
    """
    values = pd.Series(text, dtype="object").fillna("").astype(str)
    distinct = pd.Series(values.unique())
    upper = distinct.str.upper().str.replace(r"[\s\-]+", "_", regex=True)
    found = pd.Series(known, index=distinct.index, dtype="object")
    for direction, pattern in reversed(_DIRECTION_PATTERNS):  # first listed wins
        hit = upper.str.contains(f"{_LETTER_BEFORE}(?:{pattern}){_LETTER_AFTER}", regex=True)
        found = found.mask(hit, direction)
    lookup = pd.Series(found.to_numpy(), index=distinct.to_numpy())
    return pd.Series(values.map(lookup).to_numpy(), index=values.index, dtype="object")
