"""Canonical operator names, families, categories and communication types.

Names are derived once per distinct (name, type, core) triple and mapped back to rows,
so the cost grows with the number of distinct kernels, not with rows. Rules:
docs/design.md "Canonical operators" and docs/formats.md §5.3, §9.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .memo import expand, memoized, through_memo
from .tables import Vocabulary, default_vocabulary

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
_KNOWN_NAMES: dict[tuple[str | None, str | None], dict[tuple[str, str, str], tuple]] = {}


def _as_text(values: pd.Series) -> pd.Series:
    return values.astype(str).fillna("")


def canonical_names(
    names: pd.Series, types: pd.Series, cores: pd.Series, vocab: Vocabulary | None = None,
) -> pd.DataFrame:
    """Derive canonical columns for distinct (name, type, core) rows.

    Returns a frame aligned with the inputs holding ``op_type_raw``, ``op_type``,
    ``family``, ``comm_type``, ``category`` and ``core``. Each row depends on its own
    (name, type, core) alone, so the rows are derived once per process
    (``_KNOWN_NAMES``) and only the triples not seen before go through the rules.
    """
    vocab = vocab or default_vocabulary()
    if not len(names):
        return _derive_names(names, types, cores, vocab)
    names, types, cores = _as_text(names), _as_text(types), _as_text(cores)
    rows = _canonical_rows(list(zip(names.tolist(), types.tolist(), cores.tolist())), vocab)
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

    return through_memo(_COMM_TYPES, [_DIGITS.sub("", name) for name in op_names], derive)


def _canonical_rows(keys: list[tuple[str, str, str]], vocab: Vocabulary) -> list[tuple]:
    """The canonical columns of each (name, type, core) text triple, through the memo."""
    def derive(unseen: list) -> list[tuple]:
        names, types, cores = (pd.Series(list(part), dtype=str) for part in zip(*unseen))
        derived = _derive_names(names, types, cores, vocab)
        return list(zip(*(derived[c].tolist() for c in DERIVED_COLUMNS)))

    return through_memo(_KNOWN_NAMES.setdefault(vocab.key, {}), keys, derive)


def _derive_names(names: pd.Series, types: pd.Series, cores: pd.Series,
                  vocab: Vocabulary) -> pd.DataFrame:
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
    table = vocab.fusion
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
    aliases = vocab.aliases
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


def _fold_comm_digits(labels: pd.Series) -> pd.Series:
    """Collective names without digits (``hcom_allReduce__586_12_1`` → ``hcom_allReduce__``)."""
    is_comm = labels.str.lower().str.match(r"(?:hcom_|hccl)")
    return labels.where(~is_comm, labels.str.replace(r"\d+", "", regex=True))


def _labels_of(cat: pd.Series) -> list[str]:
    """A categorical's category names as text, then ``""`` for code -1 (missing)."""
    return [*cat.cat.categories.astype(str).tolist(), ""]


def canonicalize(frame: pd.DataFrame, vocab: Vocabulary | None = None) -> pd.DataFrame:
    """Replace raw ``op_type_raw``/``core`` with the canonical name columns (categoricals).

    The rows' distinct (name, type, core) are taken on category codes (one int64 per
    row, hashed: linear where sorting rows was not) and named through the per-process
    memo of ``canonical_names``.
    """
    vocab = vocab or default_vocabulary()
    names = frame["op_name"].astype("category")
    # Every collective has its own name (hcom_allReduce__586_12_1); its digits never
    # decide the canonical columns, so fold them before taking distinct rows.
    folded = memoized(_fold_comm_digits, names.cat.categories.astype(str).tolist())
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
        derived = _derive_names(nothing, nothing, nothing, vocab)
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
        rows = _canonical_rows(list(zip(*reversed(keys))), vocab)
        for position, column in enumerate(DERIVED_COLUMNS):
            out[column] = expand(np.array([row[position] for row in rows], dtype=object),
                                 inverse)
    out["op_name"] = names
    return out


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
