"""Per-process memos: a value is derived once per distinct text, then mapped to rows.

Every rank of a job runs the same kernels, so a rank after the first derives almost
nothing; the memos are bounded for a library user who reads many unrelated profiles.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

# Entries a memo may hold before it is emptied and filled again.
KNOWN_NAMES_LIMIT = 200_000


def through_memo(known: dict, keys: list, derive: Callable[[list], list]) -> list:
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


def expand(values: pd.Series | np.ndarray, inverse: np.ndarray) -> pd.Categorical:
    """Spread per-distinct values back to rows as a categorical, without object arrays."""
    codes, uniques = pd.factorize(values)
    return pd.Categorical.from_codes(codes[inverse], categories=pd.Index(uniques).astype(str))


# What each value-wise ``normalize_distinct`` function made of each text in this process.
_NORMALIZED: dict[Callable, dict[str, str]] = {}


def memoized(func: Callable[[pd.Series], pd.Series], texts: list[str]) -> list[str]:
    """``func(pd.Series(texts))`` as a list, each text through ``func`` once per process."""
    return through_memo(_NORMALIZED.setdefault(func, {}), texts,
                        lambda unseen: func(pd.Series(unseen, dtype=str)).tolist())


def normalize_distinct(values: pd.Series, func: Callable[[pd.Series], pd.Series]
                       ) -> pd.Categorical:
    """Apply a vectorized string ``func`` to the distinct values only; return a categorical.

    ``func`` maps each value on its own (it is asked once per distinct text and process).
    The categories come in the order the values first appear; a missing value counts as
    ``""``.
    """
    cats = values if isinstance(values.dtype, pd.CategoricalDtype) else values.astype("category")
    codes = cats.cat.codes.to_numpy()
    inverse, first_seen = pd.factorize(codes)
    labels = cats.cat.categories.astype(str).tolist() + [""]  # code -1 (missing) picks ""
    normalized = memoized(func, [labels[code] for code in first_seen.tolist()])
    return expand(np.array(normalized, dtype=object), inverse)
