"""Every tunable in two frozen objects, each value with the reason for it.

``Thresholds`` change what the report says: significance, the smallest change called a
regression, which steps and ranks are outliers, how many rows are listed. ``Limits`` bound
what a run may cost (memory, time, input that is not sane); a limit that is reached is
named in the report (a ``sampled`` note, an interval left out, a refused file). The CLI
builds both from its flags and passes them down; no stage keeps a bare cut-off of its own
(benchmath's ``Thresholds`` pattern). Readers run in threads, worker processes and Dask
workers that are not handed the command line's objects, so they take ``DEFAULT_LIMITS``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """Decision rules and display sizes; percentages in percent, sizes in the unit named."""

    # Significance level of every test (the usual 5 %; BH keeps it across operator keys).
    alpha: float = 0.05
    # Smallest per-instance operator change called regressed/improved: kernel noise between
    # two collections of one job is a few percent.
    threshold_pct: float = 5.0
    # Smallest step-time change called regressed/improved: the step sums everything, and
    # 2 % is what an upgrade ticket cares about.
    step_threshold_pct: float = 2.0
    # With one step per side nothing measures the noise, so the step needs this much: the
    # same run profiled at Level1 and Level2 differs by 4.9 % in its one step (MI data).
    one_step_threshold_pct: float = 5.0
    # ``--fail-on-regression PCT``: the step gate; None when not asked for. A failing gate
    # makes the step ``regressed`` (status and gate are one decision).
    fail_on_regression_pct: float | None = None
    # Leave leading warm-up steps out of the step comparison, on both sides alike (False
    # when the user chose the steps with ``--steps``).
    screen_steps: bool = True
    # Robust z (|step − median| / (1.4826·MAD)) beyond which a step is an outlier: the
    # Iglewicz-Hoaglin cut-off, as for ranks. No floor on the spread: a floor of 1 % of
    # the median made ordinary +4 % host stalls 4σ outliers; ``step_outlier_pct`` is the
    # guard against near-identical steps instead.
    step_outlier_z: float = 3.5
    # A step is an outlier only when also this far (percent) off its side's median: a
    # warm-up step is tens of percent slow, while a run's ordinary steps (stalls included)
    # spread by a few percent.
    step_outlier_pct: float = 5.0
    # Steps per side needed before any can be screened: with two, the median cannot tell
    # which is the odd one.
    min_screen_steps: int = 3
    # Confidence level of the ratio intervals.
    confidence: float = 0.95
    # Fewest instances per side for a ratio interval: below it the interval spans orders
    # of magnitude and says nothing.
    min_ci_instances: int = 5
    # Steps per side from which the step test is Mann-Whitney (robust to a few slow steps,
    # both sides alike); below it Welch's t on log step times, which leans on log-normal
    # steps (a note says so): a rank test of 4 vs 4 cannot go under p = 0.029, of 5 vs 5
    # it reaches 0.008.
    few_steps: int = 5
    # Share of either side's kernel time that same-shape keys must hold for per-operator
    # verdicts to describe the run; below it a ``shapes-differ`` note says they do not.
    same_shape_share: float = 0.5
    # Kernel time per step over the step time below which a side is an ``excerpt`` (a
    # trimmed table, a host-bound or idle run): a training or inference step keeps its
    # device busy for tens of percent; 29 rows over a 2.86 s span are 0.35 %.
    busy_share: float = 0.05
    # Share of either side's compute kernel time that keys both runs execute must hold
    # for the runs to be one workload: an upgrade renames and reshapes some kernels, never
    # four fifths of them; two different models share their copies and element-wise kernels.
    common_share: float = 0.2
    # ... and, with so few keys in common, the share of the kernel families' mix (each
    # family's share of compute time, overlapped) below which the runs are two workloads:
    # a batch or sequence change keeps the mix (99.9 %), two models do not (6-29 %).
    common_family_share: float = 0.5
    # Share of the step change that Free or Bubble growth must reach to be named in the
    # headline: below a third it is a detail of the breakdown table.
    headline_part_share: float = 1 / 3
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
    # A rank that starts last in at least this share of a collective's instances, at a cost
    # to the others of at least ``material_pct`` of the step, raises ``late-rank``.
    late_rank_share: float = 0.75
    # Share of a key's kernel time that must run with another attribute value (total
    # variation distance of the two sides' value shares) for the attribute to have changed:
    # a clean switch moves all of it, a mixed key's mode flipping on noise a few points.
    attribute_change_share: float = 0.5
    # Share of a slower family's like-for-like change that keys with one changed attribute
    # must carry for the compute sentence to name that change as its cause.
    cause_share: float = 0.5
    # Share of a grown Free that must be the device waiting for launches for ``host-bound``.
    host_bound_share: float = 0.5
    # Relative growth of peak reserved device memory that raises ``memory-growth``: an
    # allocator's peak moves by a few percent between collections of one job.
    memory_growth_pct: float = 5.0
    # ``memory-growth`` is ``high`` from this many times ``memory_growth_pct`` on.
    memory_severe_factor: float = 2.0
    # A device-memory peak move of at least this many MB reaches the headline whatever its %
    # (and makes ``memory-growth`` high): 1 GB decides whether a batch still fits.
    memory_headline_mb: float = 1024.0
    # Largest 1-D input (elements) taken for an attribute moved into the inputs when shapes
    # are matched across stacks: axes, sizes and perms have at most 8 entries (8-D tensors).
    attribute_input_max_elements: int = 8
    # Rows per table of movers (``--top``): operators, framework operators, groups, ranks
    # and the candidates summary's operator × candidate table; a screen's worth.
    top_n: int = 15
    # Operator allocations listed in the memory section: it shows the largest movers only.
    memory_top_n: int = 20


@dataclass(frozen=True)
class Limits:
    """Bounds on cost and on input sanity; sizes in the unit named."""

    # Durations kept per side over all ranks (16 bytes each): 4M keep medians and tests
    # exact for any real single-node capture; beyond it every (rank, step, operator) keeps
    # the same fraction, and a ``sampled`` note says so.
    sample_budget: int = 4_000_000
    # Pairs per side behind a Hodges-Lehmann interval: 300² differences bound its cost.
    max_pairs_per_side: int = 300
    # Largest n·m whose Mann-Whitney p is computed exactly (without ties): its null
    # distribution costs about m·mn/2 additions (2.5 ms at 100 vs 100, once per pair of
    # sizes), and beyond it the normal approximation is within 11 % and conservative.
    exact_max_pairs: int = 10_000
    # Edits (inserted + removed framework ops) one step may need before its alignment falls
    # back to pairing k-th instances: Myers' diff costs O((n + m)·D) and D² memory, and two
    # runs of one model differ by a handful of ops per step.
    max_align_edits: int = 1000
    # Seconds to wait for a Dask scheduler before calling it unreachable.
    dask_timeout_s: float = 30.0
    # Wall seconds that spreading one input's ranks over worker processes must save (by the
    # planner's cost model, read/execute.py) before a pool is started: its workers forked
    # from the forkserver, whose one import of the package (~1 s of CPU) runs beside this
    # process's start, and every chunk's summaries pickled back.
    rank_pool_min_s: float = 0.5
    # JSON nesting refused beyond this depth: profiler JSON nests at most ~8 levels, while
    # Python's parser recurses per level and ijson's memory grows with the depth squared.
    max_json_depth: int = 64
    # Leading blank bytes of a trace read before calling it "not a trace": valid traces
    # start with [ or { at once; a gzip of blanks would otherwise be inflated whole.
    max_leading_blank_bytes: int = 1 << 20
    # Bytes of a trace the host-side pass holds before an event closes; past it the event
    # goes to ijson's stream: real events are under a few KiB, and memory stays bounded.
    max_pending_trace_bytes: int = 64 << 20
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


DEFAULT_THRESHOLDS = Thresholds()
DEFAULT_LIMITS = Limits()
