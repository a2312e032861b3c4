"""``host-bound``: Free grew because the device waited for the host's launches.

Free is device time with neither kernel nor collective. Part of it sits on a launch the
host had not issued yet (host-bound); the rest has other causes (a synchronization, a
dataloader, the capture's edges). When Free grew and the host-bound part holds most of
the growth (``host_bound_share``), the finding says so with both figures and quotes the
profiler settings that cost host time when they differ (``with_stack`` walks the Python
stack at every op). Host op compilation (``aclopCompileAndExecute``: CANN compiles an op
no cached kernel fits before it launches it) is a cause of its own, not a cost of the
profiler: the finding names it with its time when its growth inside the waits is material
(``material_pct`` of the base step, the floor Free's growth itself must pass).
"""

from __future__ import annotations

import math

from ..compare import Comparison, HostTime
from .base import Finding, ms

COMPILE = "compile_us"  # HOST_STEP_COLUMNS: host op compilation inside host-bound waits


def settings_text(host: HostTime) -> str:
    """``profiler with_stack false → true`` for each host-costly setting that differs."""
    return "; ".join(f"profiler {s} {b} → {n}" for s, b, n in host.settings)


def compile_figures(host: HostTime) -> tuple[float, float] | None:
    """Host op compilation inside the waits, µs per step (base, new); None unless both known.

    A run whose profile records no compilation (Level0, or no CANN API level) has NaN.
    """
    figures = (host.base.get(COMPILE, math.nan), host.new.get(COMPILE, math.nan))
    return figures if all(math.isfinite(f) for f in figures) else None


def _compile_text(host: HostTime, floor: float) -> tuple[str, dict]:
    """The sentence naming host op compilation, and its data; ``""`` when not material."""
    figures = compile_figures(host)
    if figures is None or figures[1] - figures[0] < floor:
        return "", {}
    base, new = figures
    grown = host.delta("host_bound_us")
    part = f" ({(new - base) / grown:.0%} of the host-bound growth)" if grown > 0 else ""
    return (f" Host op compilation (aclopCompileAndExecute) inside those waits grew "
            f"{ms(base)} → {ms(new)} per step{part}: ops on the aclop path compiled on "
            "the host before their launch."), {
        "compile_base_us": float(base), "compile_new_us": float(new),
        "compile_delta_us": float(new - base)}


def host_bound(cmp: Comparison) -> list[Finding]:
    """The finding when Free grew by at least ``material_pct`` and is mostly host-bound."""
    host = cmp.host
    if host is None:
        return []
    t = cmp.thresholds
    grown = host.delta("free_us")
    floor = t.material_pct / 100 * max(cmp.step.base_us or 0.0, 1e-9)
    share = host.host_bound_share
    if not (grown >= floor and math.isfinite(share) and share >= t.host_bound_share):
        return []
    settings = settings_text(host)
    quoted = (f" The profiler settings differ in what costs host time ({settings}): "
              "re-collect both runs with the same settings before blaming the stack."
              if settings else "")
    busy = (f" Host busy time {ms(host.base['host_busy_us'])} → "
            f"{ms(host.new['host_busy_us'])} per step." if all(
                math.isfinite(s["host_busy_us"]) for s in (host.base, host.new)) else "")
    compiling, compile_data = _compile_text(host, floor)
    # The host-bound part may grow more than Free (the other part shrank): the share is
    # then above 100 %, said as a share of Free's growth, never as "of it".
    return [Finding(
        "host-bound", "medium", f"Free grew {ms(grown)}: the device waits for the host",
        f"Free (device idle) grew {ms(host.base['free_us'])} → {ms(host.new['free_us'])} "
        f"per step; the device waiting for a launch the host had not issued (host-bound) "
        f"grew {ms(host.base['host_bound_us'])} → {ms(host.new['host_bound_us'])}, "
        f"{ms(host.delta('host_bound_us'))} ({share:.0%} of Free's growth)."
        f"{compiling}{busy}{quoted}",
        float(grown),
        {"free_delta_us": float(grown), "host_bound_delta_us": float(host.delta("host_bound_us")),
         "share": float(share), "settings": [list(s) for s in host.settings], **compile_data})]
