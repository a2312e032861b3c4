"""Every tunable of the comparison in one frozen object, each with the reason for its value.

The CLI builds one ``Settings`` from its flags and passes it down; no stage keeps a bare
cut-off of its own (benchmath's ``Settings`` pattern).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    """Decision thresholds and limits; percentages are in percent, sizes in the unit named."""

    # Significance level of every test (the usual 5 %; BH keeps it across operator keys).
    alpha: float = 0.05
    # Smallest per-instance operator change called regressed/improved: kernel noise between
    # two collections of one job is a few percent.
    threshold_pct: float = 5.0
    # Smallest step-time change called regressed/improved: the step sums everything, and
    # 2 % is what an upgrade ticket cares about.
    step_threshold_pct: float = 2.0
    # Confidence level of the ratio intervals.
    confidence: float = 0.95
    # Pairs per side behind a Hodges-Lehmann interval: 300² differences bound its cost.
    max_pairs_per_side: int = 300
    # Fewest instances per side for a ratio interval: below it the interval spans orders
    # of magnitude and says nothing.
    min_ci_instances: int = 5
    # Steps per side below which Welch's t-test leans on normal step times (a note says so).
    few_steps: int = 4
    # An MC2 split must gain at least this share of the fused ops it lost in each split op.
    fusion_min_share: float = 0.5
    # Share of the compute gain communication must eat for the gain to count as "hidden".
    eaten_share: float = 0.5
    # Step-level moves below this share of the base step (percent) earn no verdict.
    material_pct: float = 1.0
    # Robust z (median ± z·1.4826·MAD) beyond which a rank is an outlier (Iglewicz-Hoaglin).
    outlier_z: float = 3.5
    # Ranks needed before one can be an outlier: a median of fewer says little.
    min_ranks: int = 4
    # Floor of the rank spread (percent of the median), so identical ranks flag only real
    # moves and not 1 µs of jitter.
    rank_floor_pct: float = 2.0
    # A device-memory peak move of at least this many MB reaches the headline whatever its %.
    memory_headline_mb: float = 1024.0
    # Seconds to wait for a Dask scheduler before calling it unreachable.
    dask_timeout_s: float = 30.0

    # Reading limits (readers take them from DEFAULT_SETTINGS: they run in threads or Dask
    # workers that are not handed the command line's Settings)
    # JSON nesting refused beyond this depth: profiler JSON nests at most ~8 levels, while
    # Python's parser recurses per level and ijson's memory grows with the depth squared.
    max_json_depth: int = 64
    # Leading blank bytes of a trace read before calling it "not a trace": valid traces
    # start with [ or { at once; a gzip of blanks would otherwise be inflated whole.
    max_leading_blank_bytes: int = 1 << 20
    # Bytes of a CSV searched for its header row: real headers are under 4 KiB, and a
    # file without a line break would otherwise be read whole as one header.
    max_header_bytes: int = 1 << 20
    # Longest duration (seconds) a row may have: no profiler capture lasts a day, while
    # broken cells (1e300, UINT64 sentinels) are far beyond it.
    max_duration_s: float = 86_400.0
    # A row lasting more than this many times the span of all shorter rows is a broken cell:
    # a collective waiting for a straggler can outlast a short capture's compute a
    # thousandfold, a sentinel outlasts it by millions.
    absurd_duration_factor: float = 10_000.0
    # Share of rows with impossible durations (negative, NaN, inf, absurdly long)
    # above which a file is refused rather than read without them: then it is not a
    # few bad rows but a broken column.
    max_bad_duration_share: float = 0.5


DEFAULT_SETTINGS = Settings()
