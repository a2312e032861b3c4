"""Comparability: where two runs are not a like-for-like stack upgrade.

A report explains base → new as the effect of the software stack. That holds only when
the rest stayed: the chip and its AI Core clock, the dtypes the compute ran in, the HCCL
algorithm, the world size, the host, and the profiler's own settings (``with_stack`` and
``l2_cache`` cost host and device time themselves). ``comparability(base, new)`` lists
each of these that differs, in the order a reader checks them, with the files both values
came from. A value unknown on a side is no difference: it is not reported, not guessed.

Pure: it reads the two Runs' provenance (``RunMeta``) and ``Run.dtype_us``, nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..schema import Run, RunMeta

# A dtype whose share of compute kernel time moves by this many percentage points makes
# the runs compute different work even when the largest dtype stays (an fp16 run with
# fp32 optimizer kernels vs an all-fp32 run); a smaller move is a few kernels re-cast.
DTYPE_SHIFT_POINTS = 20.0
MAX_DTYPES_SHOWN = 3
RANKS_READ = "the rank results read (no world_size recorded)"
# Settings of how the profile is written out after the run, not of what ran: another
# export type or simplification is the same run on disk.
EXPORT_ONLY = ("export_type", "data_simplification")


@dataclass(frozen=True)
class Comparable:
    """One way two runs differ besides their stack: what, each side's value, and where.

    ``source`` names the file or table the values came from; ``base: …; new: …`` when
    the sides read them from different files.
    """

    what: str
    base: str
    new: str
    source: str


def comparability(base: Run, new: Run, *,
                  shift_points: float = DTYPE_SHIFT_POINTS) -> tuple[Comparable, ...]:
    """Every difference between the two runs that is not the stack, one entry each.

    In order: device, AI Core frequency, world size, compute dtype mix, HCCL algorithm per
    communication type, each profiler setting, host. Empty when the runs are alike as far
    as both record.
    """
    return (*_device(base.meta, new.meta), *_aicore_freq(base.meta, new.meta),
            *_world_size(base.meta, new.meta),
            *_dtype_mix(base, new, shift_points), *_algorithms(base.meta, new.meta),
            *_settings(base.meta, new.meta), *_host(base.meta, new.meta))


def _source(base: str | None, new: str | None) -> str:
    if base == new or not new:
        return base or ""
    return f"base: {base}; new: {new}" if base else new


def _source_of(meta: RunMeta, fact: str) -> str | None:
    return meta.sources.get(fact) or meta.detail_sources.get(fact)


def _differs(what: str, base: str | None, new: str | None, fact: str, base_meta: RunMeta,
             new_meta: RunMeta) -> list[Comparable]:
    """One entry when both values are known and differ; its source is ``fact``'s."""
    if base is None or new is None or base == new:
        return []
    return [Comparable(what, base, new, _source(_source_of(base_meta, fact),
                                                _source_of(new_meta, fact)))]


def chip_class(device: str) -> str | None:
    """The class of a recorded chip, as the PMU column hint names classes; None if unknown.

    910B and 910_93 (A3) split cube and vector cores; the first 910s (910A, Pro, Premium)
    have one unified AI Core.
    """
    if re.match(r"Ascend910(B|_93)", device):
        return "Ascend910B-class"
    if re.match(r"Ascend910(A|Pro|Premium|$)", device):
        return "Ascend910A-class"
    return None


def _class(hint: str | None) -> str | None:
    return hint.split(" (")[0] if hint else None


def _device(base: RunMeta, new: RunMeta) -> list[Comparable]:
    """The recorded device; the PMU column hint when a side records no device.

    With a device on one side and only a hint on the other, the device's class is held
    against the hint (``Ascend910A-class`` vs ``Ascend910B``).
    """
    if base.device is not None and new.device is not None:
        return _differs("device", base.device, new.device, "device", base, new)
    if base.device is None and new.device is None:
        return _differs("device", base.device_hint, new.device_hint, "device_hint", base, new)
    known, hinted = (base, new) if base.device is not None else (new, base)
    assert known.device is not None
    if _class(hinted.device_hint) is None or chip_class(known.device) in (
            None, _class(hinted.device_hint)):
        return []
    values = {id(known): known.device, id(hinted): hinted.device_hint}
    sources = {id(known): _source_of(known, "device"),
               id(hinted): _source_of(hinted, "device_hint")}
    return [Comparable("device", values[id(base)] or "", values[id(new)] or "",
                       _source(sources[id(base)], sources[id(new)]))]


AICORE_FREQ = "AI Core frequency"


def _aicore_freq(base: RunMeta, new: RunMeta) -> list[Comparable]:
    """The AI Core clock (MHz) both record: another clock scales every AI Core kernel."""
    def shown(value: str | None) -> str | None:
        return None if value is None else (f"{value} MHz" if value.replace(".", "", 1)
                                           .isdigit() else value)

    return _differs(AICORE_FREQ, shown(base.aicore_freq), shown(new.aicore_freq),
                    "aicore_freq", base, new)


def _world_size(base: RunMeta, new: RunMeta) -> list[Comparable]:
    """world_size when both record it, else the ranks read when both read several."""
    if base.world_size is not None and new.world_size is not None:
        return _differs("world size", str(base.world_size), str(new.world_size),
                        "world_size", base, new)
    if len(base.ranks) > 1 and len(new.ranks) > 1 and len(base.ranks) != len(new.ranks):
        return [Comparable("ranks read", str(len(base.ranks)), str(len(new.ranks)),
                           RANKS_READ)]
    return []


def _shares(dtype_us: Mapping[str, float]) -> dict[str, float]:
    """Percent of compute kernel time per recorded dtype (kernels without one left out)."""
    known = {dtype: us for dtype, us in dtype_us.items() if dtype and us > 0}
    total = sum(known.values())
    return {dtype: 100.0 * us / total for dtype, us in known.items()} if total else {}


def _dominant(shares: Mapping[str, float]) -> str:
    return min(shares, key=lambda dtype: (-shares[dtype], dtype))


def _dtype_mix(base: Run, new: Run, shift_points: float) -> list[Comparable]:
    """The largest dtype differs, or a dtype's share moves by ``shift_points`` or more.

    Each side shows the same dtypes, with its own shares (``FLOAT 59%, FLOAT16 40%``): the
    largest of either side, then those that moved most, at most MAX_DTYPES_SHOWN.
    """
    before, after = _shares(base.dtype_us), _shares(new.dtype_us)
    if not before or not after:
        return []
    move = {d: after.get(d, 0.0) - before.get(d, 0.0) for d in {*before, *after}}
    movers = sorted((d for d in move if abs(move[d]) >= shift_points),
                    key=lambda d: (-abs(move[d]), d))
    tops = [_dominant(before), _dominant(after)]
    if tops[0] == tops[1] and not movers:
        return []
    shown = list(dict.fromkeys([*tops, *movers]))[:MAX_DTYPES_SHOWN]

    def side(shares: Mapping[str, float]) -> str:
        ordered = sorted(shown, key=lambda d: (-shares.get(d, 0.0), d))
        return ", ".join(f"{d} {shares.get(d, 0.0):.0f}%" for d in ordered)

    return [Comparable("compute dtype mix", side(before), side(after),
                       _source(_source_of(base.meta, "compute_dtypes"),
                               _source_of(new.meta, "compute_dtypes")))]


def _algorithms(base: RunMeta, new: RunMeta) -> list[Comparable]:
    """Per communication type both run, its HCCL algorithm."""
    return [entry for comm_type in sorted(set(base.hccl_algorithms) & set(new.hccl_algorithms))
            for entry in _differs(f"HCCL algorithm ({comm_type})",
                                  base.hccl_algorithms[comm_type],
                                  new.hccl_algorithms[comm_type], "hccl_algorithms", base, new)]


def _settings(base: RunMeta, new: RunMeta) -> list[Comparable]:
    """Each profiler setting both record, in the order the reader lists them."""
    return [entry for setting in base.profiler_config
            if setting in new.profiler_config and setting not in EXPORT_ONLY
            for entry in _differs(f"profiler {setting}", base.profiler_config[setting],
                                  new.profiler_config[setting], "profiler_config", base, new)]


def _host(base: RunMeta, new: RunMeta) -> list[Comparable]:
    return _differs("host", base.host, new.host, "host", base, new)
