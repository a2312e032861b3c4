"""Communication groups paired down the rungs of PAIRING, on tables worked out by hand.

Each row is one group of one run as ``_group_side`` describes it (the hash is the index).
A rung pairs a key that exactly one unpaired group holds on each side; an empty part of a
key says nothing.
"""

from __future__ import annotations

import pandas as pd

from cann_diff.compare.communication import _pair

COLUMNS = ["pair_members", "collectives", "pair_ranks", "data_mb"]


def _side(rows: dict[str, tuple[str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)


def _pairs(table: pd.DataFrame) -> list[tuple]:
    return [tuple(None if pd.isna(v) else v for v in row)
            for row in table[["base_group", "new_group", "paired_by"]].itertuples(index=False)]


def test_each_rung_pairs_what_the_ones_above_left():
    base = _side({"h1": ("0,1", "AllReduce×2", "2", "4"),
                  "h2": ("2,3", "AllGather×1", "2", "1"),
                  "h3": ("4,5", "AllGather×1", "2", "2")})
    new = _side({"n1": ("0,1", "AllReduce×2", "2", "4"),   # same members as h1
                 "n2": ("0,2", "AllGather×1", "2", "2"),   # h3's collectives, ranks, data
                 "n3": ("1,3", "AllGather×1", "2", "8"),   # collectives and ranks: h2 is left
                 "n4": ("6,7", "Broadcast×1", "2", "1")})  # nothing like it in base
    assert _pairs(_pair(base, new)) == [("h1", "n1", "ranks"), ("h3", "n2", "signature"),
                                        ("h2", "n3", "collectives"), (None, "n4", None)]


def test_a_key_two_groups_hold_pairs_neither_and_an_empty_key_says_nothing():
    base = _side({"a": ("", "AllReduce×1", "", "1"),       # no shared member: no key
                  "b": ("0,1", "AllReduce×1", "2", "1"),
                  "c": ("2,3", "AllReduce×1", "2", "1")})  # b and c share every later key
    new = _side({"a": ("", "AllReduce×1", "", "1"),        # same hash: pairs by name
                 "x": ("4,5", "AllReduce×1", "2", "1")})
    assert _pairs(_pair(base, new)) == [("a", "a", "name"), ("b", None, None),
                                        ("c", None, None), (None, "x", None)]


def test_an_empty_side_pairs_nothing():
    base = _side({"h1": ("0,1", "AllReduce×2", "2", "4")})
    table = _pair(base, base.iloc[:0])
    assert _pairs(table) == [("h1", None, None)]
