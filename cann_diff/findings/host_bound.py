"""``host-bound``: Free grew because the device waited for the host's launches.

Free is device time with neither kernel nor collective. Part of it sits on a launch the
host had not issued yet (host-bound); the rest has other causes (a synchronization, a
dataloader, the capture's edges). When Free grew and the host-bound part holds most of
the growth (``host_bound_share``), the finding says so with both figures and quotes the
profiler settings that cost host time when they differ (``with_stack`` walks the Python
stack at every op).
"""

from __future__ import annotations

import math

from ..compare import Comparison, HostTime
from .base import Finding, ms


def settings_text(host: HostTime) -> str:
    """``profiler with_stack false → true`` for each host-costly setting that differs."""
    return "; ".join(f"profiler {s} {b} → {n}" for s, b, n in host.settings)


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
    return [Finding(
        "host-bound", "medium", f"Free grew {ms(grown)}: the device waits for the host",
        f"Free (device idle) grew {ms(host.base['free_us'])} → {ms(host.new['free_us'])} "
        f"per step; {ms(host.delta('host_bound_us'))} of it ({share:.0%}) is the device "
        f"waiting for a launch the host had not issued (host-bound "
        f"{ms(host.base['host_bound_us'])} → {ms(host.new['host_bound_us'])}).{busy}{quoted}",
        float(grown),
        {"free_delta_us": float(grown), "host_bound_delta_us": float(host.delta("host_bound_us")),
         "share": float(share), "settings": [list(s) for s in host.settings]})]
