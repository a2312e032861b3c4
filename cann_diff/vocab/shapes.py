"""Input shapes and dtypes as every stage compares them.

Readers normalize the displayed text (``normalize_shapes``, ``normalize_dtypes``); the match
stage pairs on ``match_shapes``: the data inputs with renamed kernels' set-aside inputs
dropped and Ascend's blocked layouts folded out (docs/formats.md §5.3).
"""

from __future__ import annotations

import pandas as pd

from .names import MISSING
from .tables import Rename, Vocabulary, default_vocabulary


def normalize_shapes(values: pd.Series) -> pd.Series:
    """Shapes as ``d,d;d,d``: quotes, blanks and ``N/A`` removed."""
    text = values.astype(str).str.replace('"', "", regex=False).str.replace(" ", "", regex=False)
    return text.where(~text.str.upper().isin(MISSING), "")


def normalize_dtypes(values: pd.Series) -> pd.Series:
    """Dtypes upper-cased with the ``DT_`` prefix dropped (``DT_BF16`` ≡ ``BF16``)."""
    text = normalize_shapes(values).str.upper()
    return text.str.replace(r"(^|;)DT_", r"\1", regex=True)


# C0, the innermost block of Ascend's blocked layouts, is 32 bytes: 8 fp32, 16 fp16/bf16,
# 32 int8 elements. One stack may block by 16 where another blocks by 8 (docs/formats.md §5.3).
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
                 vocab: Vocabulary | None = None) -> pd.DataFrame:
    """Shapes for matching across stacks, beside the displayed ``input_shapes``.

    Returns ``match_shapes`` — the data inputs, with the rename table's
    ``set_aside_inputs`` dropped and C0 blocks folded out (``_unblocked``) — and
    ``attribute_inputs``: the small inputs newer kernels take in place of attributes
    (0-D, or 1-D of at most ``max_elements`` values), as ``<4><>``. The match stage
    pairs on ``match_shapes`` when one side has no attribute inputs or both have the same
    (docs/design.md "Canonical operators"). One call per distinct (type, shapes) pair.
    """
    renames = (vocab or default_vocabulary()).renames
    forms = [_match_form(t, s, max_elements, renames)
             for t, s in zip(op_types.astype(str), shapes.astype(str))]
    data, attributes = zip(*forms) if forms else ((), ())
    return pd.DataFrame({"match_shapes": list(data), "attribute_inputs": list(attributes)},
                        index=op_types.index)


