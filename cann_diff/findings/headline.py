"""The headline: one sentence a manager understands — the step verdict, and why.

It names every part of the step change that holds at least a fifth of it
(``story.step_parts``: computing, exposed communication, Free, Bubble — said as "less
Bubble", since Stage is the span less it — and Preparing when they move as much), each
with its sign, largest first. Computing is said as its
split (like-for-like kernels apart from work that is no longer or newly done), exposed
communication with its collectives and the part of their elapsed time that grew. With
one step per side the size of the change is not established, and the sentence says so.
When ``comm-hides-compute`` fires, the sentence leads with the kernel gain it hid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .. import format as fmt
from ..compare import Comparison
from .base import Finding
from .compute_split import ComputeSplit
from .fusion import FusionGroup
from .host_bound import settings_text
from .story import (
    BUBBLE,
    OTHER_PARTS,
    Part,
    collective_parts,
    collectives_text,
    growth_short,
    like_for_like_examples,
    signed_ms,
    step_change,
    step_parts,
    step_sign,
)

BY_TYPE = " Kernels were compared by type only: the profiles record no input shapes."
ONE_STEP = ("one capture per side: the size of the change is not established "
            "(re-collect ≥ 5 steps per side)")


def _screened(cmp: Comparison) -> str:
    """``; warm-up steps left out on both sides: …`` naming them, or ``""``."""
    s = cmp.step
    if not s.screened:
        return ""
    named = ", ".join(f"{x.side} step {x.step}"
                      + (f" at {x.stage_us / x.median_us:.1f}× the median"
                         if x.median_us > 0 and x.reason == "warm-up" else "")
                      for x in s.screened)
    every = ""
    if s.all_steps:
        apart = abs(step_change(s.all_steps) - s.all_steps.delta_pct) > MEAN_APART
        every = f"; over all steps {fmt.pct(step_change(s.all_steps))}" + (
            f" (mean step {fmt.pct(s.all_steps.delta_pct)})" if apart else "")
    return f"; warm-up steps left out on both sides: {named}{every}"


MEAN_APART = 1.0  # points between the test's estimate and the mean's change worth saying


def _mean(cmp: Comparison) -> str:
    """``; the mean step …`` when an outlier moves the mean away from the test's estimate."""
    s = cmp.step
    if s.test is None or abs(step_change(s) - s.delta_pct) <= MEAN_APART:
        return ""
    return (f"; the mean step changes by {fmt.pct(s.delta_pct)}, moved by an outlier step "
            "the test weighs as any other")


def _caveat(cmp: Comparison) -> str:
    return f"; {ONE_STEP}" if cmp.step.p_value is None else ""


def _compute_phrase(cmp: Comparison, compute: ComputeSplit) -> str:
    """Computing's change: its like-for-like kernels, and the largest other row."""
    like = compute.like_for_like_us
    examples = like_for_like_examples(cmp, 1.0 if like > 0 else -1.0, 2)
    word = "slower" if like > 0 else "faster"
    matched = " (matched by type: no shapes recorded)" if by_type(cmp) else ""
    pieces = [f"like-for-like kernels{matched} {fmt.ms(abs(like))} ms {word}"
              + (f": {'; '.join(p.text(nested=True) for p in examples)}" if examples else "")]
    others = [(abs(v), v, label) for v, label in (
        (compute.removed_us, "of kernels no longer run"),
        (compute.added_us, "of kernels run only in new"),
        (compute.count_changed_us, "from kernels run more or fewer times"),
        (compute.reshaped_us, "from reshaped kernels"),
        (compute.mc2_us, "from MC2 fused kernels replaced by split ones"))
        if v and abs(v) >= abs(like)]
    if others:
        _, value, label = max(others)
        pieces.insert(0, f"{signed_ms(value)} {label}")
    return "; ".join(pieces)


def by_type(cmp: Comparison) -> bool:
    """Whether kernels were compared by type only (the ``no-shapes`` note: Level0)."""
    return any(note.code == "no-shapes" for note in cmp.warnings)


def _comm_phrase(cmp: Comparison) -> str:
    """Exposed communication's collectives, and which part of their time grew."""
    cause = growth_short(cmp)
    return "; ".join([*collectives_text(cmp, collective_parts(cmp, 2)),
                      *([cause] if cause else [])])


def free_phrase(cmp: Comparison) -> str:
    """How much of Free's change is the device waiting for launches, and host-costly settings.

    ``""`` without a host side on both runs.
    """
    host = cmp.host
    if host is None:
        return ""
    bound = host.delta("host_bound_us")
    pieces = []
    if bound == bound and abs(bound) >= 1:  # NaN-safe; under 1 µs is nothing to say
        verb = "more" if bound > 0 else "less"
        pieces.append(f"{fmt.ms(abs(bound))} ms {verb} waiting for the host's launches")
    settings = settings_text(host)
    if settings:
        pieces.append(settings)
    return "; ".join(pieces)


def _part_phrase(cmp: Comparison, part: Part, compute: ComputeSplit) -> str:
    if part.name == BUBBLE:  # Stage = span − Bubble: said the way it adds
        return (f"less Bubble {signed_ms(part.delta_us)} (pipeline receive time, which "
                "Stage leaves out)")
    detail = ""
    if part.name == "computing":
        detail = _compute_phrase(cmp, compute)
    elif part.name == "exposed communication":
        detail = _comm_phrase(cmp)
    elif part.name.startswith("Free"):
        detail = free_phrase(cmp)
    return f"{part.name} {signed_ms(part.delta_us)}" + (f" ({detail})" if detail else "")


def _split_cause(fusion: Sequence[FusionGroup]) -> str:
    split = [g.fused_type for g in fusion if g.direction == "split"]
    return f"; {', '.join(split)} no longer fused" if split else ""


def _hidden(cmp: Comparison, fusion: Sequence[FusionGroup], compute: ComputeSplit,
            hidden: Finding) -> str:
    s = cmp.step
    base_new = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    matched = " (matched by type: no shapes recorded)" if by_type(cmp) else ""
    gain = (f"its like-for-like kernels{matched} got {fmt.ms(-compute.like_for_like_us)} ms "
            "faster")
    rest = [_part_phrase(cmp, p, compute) for p in step_parts(cmp)
            if p.name not in ("computing", "exposed communication")]
    comm = (f"exposed communication grew by {fmt.ms(hidden.data['delta_exposed_us'])} ms"
            f" ({_comm_phrase(cmp)}){_split_cause(fusion)}")
    tail = f"; {'; '.join(rest)}" if rest else ""
    if step_change(s) > 0:
        return (f"{cmp.new.label} is {abs(step_change(s)):.1f}% slower than {cmp.base.label} "
                f"({base_new}{_mean(cmp)}{_screened(cmp)}{_caveat(cmp)}): {gain}, but "
                f"{comm}{tail}.")
    return (f"{cmp.new.label} is only {abs(step_change(s)):.1f}% faster than {cmp.base.label} "
            f"({base_new}{_mean(cmp)}{_screened(cmp)}{_caveat(cmp)}): {gain}, but {comm}, "
            f"eating most of the gain{tail}.")


def _unchanged(cmp: Comparison) -> str:
    s = cmp.step
    base_new = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    between = f"{cmp.base.label} and {cmp.new.label}"
    if s.significant:
        return (f"Step time between {between} changed by {fmt.pct(step_change(s))} ({base_new}"
                f"{_mean(cmp)}{_screened(cmp)}): significant, but below the "
                f"{s.threshold_pct:g}% step threshold.")
    if s.significant is None:
        return (f"No change in step time beyond the {s.threshold_pct:g}% threshold between "
                f"{between} ({base_new}, {fmt.pct(s.delta_pct)}; one step per side: "
                f"significance unknown{_screened(cmp)}).")
    return (f"No significant change in step time between {between} ({base_new}, "
            f"{fmt.pct(step_change(s))}{_mean(cmp)}{_screened(cmp)}).")


def unmeasured_headline(cmp: Comparison, labels: Sequence[str]) -> str:
    """The verdict when a run's kernel durations are no measurement: step figures only."""
    s = cmp.step
    runs = " and ".join(labels)
    step = (f" Its step figures say {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step "
            f"({fmt.pct(s.delta_pct)}), which kernel timing cannot explain."
            if s.base_us is not None and s.new_us is not None and s.delta_pct == s.delta_pct
            else "")
    return (f"No kernel timing verdict: the kernel durations of {runs} are not measurements "
            f"(see the warnings); counts and operator sets are compared.{step}")


def headline(cmp: Comparison, findings: Sequence[Finding], fusion: Sequence[FusionGroup],
             compute: ComputeSplit) -> str:
    """One sentence: the verdict on the step time, and every large part of why."""
    s = cmp.step
    hidden = next((f for f in findings if f.id == "comm-hides-compute"), None)
    if hidden:
        return _hidden(cmp, fusion, compute, hidden)
    if s.status == "unchanged":
        return _unchanged(cmp)
    word = "slower" if s.status == "regressed" else "faster"
    named = step_parts(cmp)
    parts = [_part_phrase(cmp, p, compute) for p in named]
    why = f": {'; '.join(parts)}" if parts else ""
    # Said once: in the computing phrase when computing is named, else after the verdict.
    shapeless = BY_TYPE if by_type(cmp) and all(p.name != "computing" for p in named) else ""
    return (f"{cmp.new.label} is {abs(step_change(s)):.1f}% {word} than {cmp.base.label} "
            f"({fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step{_mean(cmp)}"
            f"{_screened(cmp)}{_caveat(cmp)}){why}{_split_cause(fusion)}.{shapeless}")


# --------------------------------------------------------------------------- the verdict

CAUSES_SHOWN = 4
OUTSIDE_STAGE = {label for _, label in OTHER_PARTS}


@dataclass(frozen=True)
class Cause:
    """One part of the step change: its figure as the step table shows it, and why.

    ``delta_us`` is the part's own change (Bubble's too, which Stage leaves out, so it
    enters the step with the opposite sign); ``share`` is the signed fraction of Δ Stage
    it makes (Bubble's negated), None for a part outside Stage.
    """

    name: str
    delta_us: float
    share: float | None
    detail: str

    @property
    def text(self) -> str:
        """``exposed communication +7.30 ms (170% of the change): AllReduce …``."""
        return f"{self.name} {signed_ms(self.delta_us)} ({fmt.share_of_change(self.share)})" + (
            f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Caveat:
    """What limits how far the verdict can be trusted, with a stable code."""

    code: str
    text: str


@dataclass(frozen=True)
class Verdict:
    """The verdict as a headline line, its ranked causes and its caveats (said once).

    ``memory`` is the device-memory sentence when a peak moved enough, else None.
    """

    line: str
    causes: tuple[Cause, ...]
    caveats: tuple[Caveat, ...]
    memory: str | None = None


def _cause(cmp: Comparison, part: Part, compute: ComputeSplit,
           fusion: Sequence[FusionGroup]) -> Cause:
    step = cmp.step.delta_us
    if part.name == BUBBLE:
        detail = "pipeline receive time, which Stage leaves out (Stage = span − Bubble)"
    elif part.name == "computing":
        detail = _compute_phrase(cmp, compute)
    elif part.name == "exposed communication":
        split = _split_cause(fusion).removeprefix("; ")
        detail = "; ".join(t for t in (_comm_phrase(cmp), split) if t)
    elif part.name.startswith("Free"):
        detail = free_phrase(cmp)
    else:
        detail = ""
    share = None if part.name in OUTSIDE_STAGE or not math.isfinite(step) or step == 0 \
        else step_sign(part) * part.delta_us / step
    return Cause(part.name, part.delta_us, share, detail)


def _line(cmp: Comparison, hidden: Finding | None, compute: ComputeSplit) -> str:
    """``new is 8.0% slower than base: 53.95 → 58.24 ms per step, p < 0.001``."""
    s = cmp.step
    figures = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    p = f", {fmt.p_phrase(s.p_value)}" if s.p_value is not None else ""
    between = f"{cmp.base.label} and {cmp.new.label}"
    if s.status == "unchanged" and hidden is None:
        if s.significant:
            return (f"Step time between {between} changed by {fmt.pct(step_change(s))}: "
                    f"{figures}{p}, below the {s.threshold_pct:g}% step threshold")
        if s.significant is None:  # no test: the threshold alone decides
            return (f"No change in step time beyond the {s.threshold_pct:g}% threshold "
                    f"between {between}: {figures} ({fmt.pct(s.delta_pct)})")
        return (f"No significant change in step time between {between}: {figures} "
                f"({fmt.pct(step_change(s))}{p})")
    change = step_change(s)
    word = "slower" if change > 0 else "faster"
    only = "only " if hidden is not None and change <= 0 else ""
    line = (f"{cmp.new.label} is {only}{abs(change):.1f}% {word} than {cmp.base.label}: "
            f"{figures}{p}")
    if hidden is not None:
        gain = fmt.ms(-compute.like_for_like_us)
        line += (f"; communication growth hides a {gain} ms kernel gain" if change > 0 else
                 f"; communication growth ate most of a {gain} ms kernel gain")
    return line


def _caveats(cmp: Comparison, alike: str) -> list[Caveat]:
    s = cmp.step
    out = []
    if s.p_value is None and s.base_us is not None and s.new_us is not None:
        out.append(Caveat("one-capture", ONE_STEP[0].upper() + ONE_STEP[1:]))
    screened = _screened(cmp).removeprefix("; ")
    if screened:
        out.append(Caveat("warm-up", screened[0].upper() + screened[1:]))
    mean = _mean(cmp).removeprefix("; ")
    if mean:
        out.append(Caveat("outlier-step", mean[0].upper() + mean[1:]))
    if by_type(cmp):
        out.append(Caveat("by-type", BY_TYPE.strip()))
    out += [Caveat(note.code, note.text[:1].upper() + note.text[1:]) for note in cmp.warnings
            if note.code in VERDICT_NOTES]
    if alike:
        out.append(Caveat("not-like-for-like", alike))
    return out


# Comparison notes that qualify the verdict itself: stated with its caveats.
VERDICT_NOTES = ("shapes-differ",)


def verdict(cmp: Comparison, findings: Sequence[Finding], fusion: Sequence[FusionGroup],
            compute: ComputeSplit, unmeasured: Sequence[str], alike: str,
            memory: str | None) -> Verdict:
    """The step verdict in one line, up to ``CAUSES_SHOWN`` causes by size, and caveats.

    The causes are the step parts the headline names (``story.step_parts``), each with
    its share of Δ Stage; nothing is named for a step that did not change (noise does not
    speak) or whose kernel durations are no measurement.
    """
    caveats = tuple(_caveats(cmp, alike))
    if unmeasured:
        return Verdict(unmeasured_headline(cmp, unmeasured).removesuffix("."), (), caveats,
                       memory)
    hidden = next((f for f in findings if f.id == "comm-hides-compute"), None)
    line = _line(cmp, hidden, compute)
    if cmp.step.status == "unchanged" and hidden is None:
        return Verdict(line, (), caveats, memory)
    parts = sorted(step_parts(cmp), key=lambda p: -abs(p.delta_us))[:CAUSES_SHOWN]
    return Verdict(line, tuple(_cause(cmp, p, compute, fusion) for p in parts), caveats,
                   memory)
