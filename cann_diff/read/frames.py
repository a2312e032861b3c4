"""Frames stacked and categorized alike, wherever rows of several parts meet.

Readers stack slices and ranks; the reduce stacks ranks' summaries. Categorical columns
whose categories differ are unioned, so that a stack compares equal however it was cut.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def by_category(values: pd.Series, func) -> pd.Series:
    """Apply a vectorized string function to the distinct values only, mapped back to rows.

    Trace and db columns repeat a few hundred names over millions of rows. Missing
    values are treated as ``""``.
    """
    cat = values.astype("category")
    distinct = pd.Series([*cat.cat.categories.astype(str), ""], dtype="object")
    mapped = func(distinct).to_numpy()
    codes = cat.cat.codes.to_numpy()  # -1 (missing) picks the appended ""
    return pd.Series(mapped[codes], index=values.index)


def concat_frames(frames) -> pd.DataFrame:
    """Concatenate frames keeping categorical columns categorical (union of categories).

    Categorical columns are joined as union_categoricals joins them: pd.concat of
    categoricals with different categories would expand them to strings first. Their
    categories are aligned on object first (an all-N/A column comes back from pyarrow
    with empty float categories).
    """
    frames = [f for f in frames if f is not None and len(f.columns)]
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    # Only columns whose categories differ between frames need the union; where every
    # frame has the same (the ranks cut from one stack), pd.concat keeps the categorical.
    # Only the first frame's categorical columns are looked up in the others: a frame's
    # whole ``dtypes`` cost ~0.09 ms, most of a small rank's share of the stacking.
    first = frames[0].dtypes.to_dict()
    differing = [c for c, dtype in first.items() if isinstance(dtype, pd.CategoricalDtype)
                 and _categories_differ(frames, c, dtype)]
    names = frames[0].columns
    columns = list(names) if all(f.columns.equals(names) for f in frames) else \
        list(dict.fromkeys(c for f in frames for c in f.columns))  # first-seen order
    merged = pd.concat([f.drop(columns=differing) for f in frames] if differing else frames,
                       ignore_index=True)
    for column in differing:
        merged[column] = _union(frames, column)
    return merged if list(merged.columns) == columns else merged[columns]


def _categories_differ(frames: list[pd.DataFrame], column: str,
                       dtype: pd.CategoricalDtype) -> bool:
    """Every frame holds ``column`` as a categorical, and not all of ``dtype``."""
    kinds = [_dtype(f, column) for f in frames]
    return all(isinstance(kind, pd.CategoricalDtype) for kind in kinds) and \
        any(kind is not dtype and kind != dtype for kind in kinds)


def _dtype(frame: pd.DataFrame, column: str):
    """``frame.dtypes.to_dict().get(column)`` without building every column's dtype.

    A name the frame repeats gives its last column's dtype, as the dict does.
    """
    if column not in frame.columns:
        return None
    if frame.columns.is_unique:
        return frame[column].dtype
    return frame.dtypes.to_dict()[column]


def concat_ranks(frames, ranks, column: str = "rank") -> pd.DataFrame:
    """``concat_frames(f.assign(rank=r) …)`` over the non-empty frames, the ids set once.

    The stacked frame gets one int64 ``column`` (``np.repeat`` of the ids by the frames'
    lengths; where the frames have the column it keeps its place, else it comes last):
    an ``assign`` per frame copied every frame, ~0.3 ms each over 1,000 ranks. An empty
    DataFrame when no frame has rows.
    """
    pairs = [(f, r) for f, r in zip(frames, ranks) if f is not None and len(f)]
    merged = concat_frames(f for f, _ in pairs)
    if pairs:
        merged[column] = np.repeat(np.array([r for _, r in pairs], dtype=np.int64),
                                   [len(f) for f, _ in pairs])
    return merged


def _union(frames: list[pd.DataFrame], column: str) -> pd.Categorical:
    """``union_categoricals`` of one categorical column of every frame.

    The categories are the first-seen union, as union_categoricals(ignore_order=True)
    gives them; every frame's codes are mapped at once (one factorize of all the frames'
    categories), not one recoding per frame, which cost ~1 ms a frame over 1,000 ranks.
    Categories and codes are read from each frame's Categorical, without a Series or an
    Index conversion per frame.
    """
    arrays = [f[column].array for f in frames]
    categories = [a.categories for a in arrays]
    sizes = np.array([len(c) for c in categories], dtype=np.int64)
    every = np.concatenate([c.to_numpy(dtype=object) for c in categories]) \
        if sizes.sum() else np.empty(0, dtype=object)
    mapping, union = pd.factorize(every)
    offsets = np.repeat(np.cumsum(sizes) - sizes, [len(f) for f in frames])
    codes = np.concatenate([a.codes.astype(np.int64) for a in arrays])
    recoded = np.where(codes >= 0, mapping[np.maximum(codes + offsets, 0)]
                       if len(mapping) else -1, -1)
    # The categories as union_categoricals leaves them: the first frame's when every frame
    # has the same, else the first-seen union, of the frames' dtype when they share one.
    # So a stack of ranks that share their categories and the same ranks stacked from
    # ranks that do not come out alike.
    dtypes = {c.dtype for c in categories}
    joined = categories[0] if (sizes == len(union)).all() else \
        pd.Index(union, dtype=categories[0].dtype if len(dtypes) == 1 else None)
    return pd.Categorical.from_codes(recoded, dtype=pd.CategoricalDtype(joined))


def cut_rows(frame: pd.DataFrame, bounds) -> list[pd.DataFrame]:
    """Rows ``bounds[i]:bounds[i + 1]`` of ``frame`` per part, each indexed from 0.

    What ``frame.iloc[low:high].reset_index(drop=True)`` gives, at about two thirds the cost:
    ``reset_index`` copies the slice's manager block by block (a view each, ~0.1 ms for a
    dozen columns), where the slice's own index is simply replaced here. Cutting 1,000
    small ranks' kernel, step and communication tables back out of their stacks took 13 %
    of a side's read.
    """
    parts = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        part = frame.iloc[low:high]
        part.index = pd.RangeIndex(high - low)
        parts.append(part)
    return parts


def as_category(values) -> pd.Categorical:
    """Text values as a categorical with ``""`` for missing (readers hand raw text on)."""
    series = pd.Series(values, dtype="object")
    return pd.Categorical(series.where(series.notna(), ""))
