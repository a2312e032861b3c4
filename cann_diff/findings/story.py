"""The sentences a reviewer reads, built from signed, named parts — never from other text.

Every number in a sentence comes from a ``Part``: a name, a signed µs per step and, for an
operator or a family, the status that backs it. A part is quoted with its own sign; an
example quoted for a part has that part's sign and carries its status mark. The parts
travel with the finding (``Finding.data["parts"]``) so that a test can hold each number
of the text against them.

* ``step_parts``: Δ Stage = Δ Computing + Δ exposed communication + Δ Free − Δ Bubble;
  every part holding at least ``NAMED_SHARE`` (20 %, as the share is shown: whole percent)
  of |Δ step| is named, largest first, and more until the named parts, each with the sign
  it enters Stage with, cover at least 80 % of it. Preparing lies outside Stage and is
  named when it moves as much.
* ``compute_parts``: Δ Computing split once (compute_split.py): like-for-like kernels,
  kernels only in base, only in new, count changes, reshaped keys, MC2, the rest.
* ``comm_parts``: exposed communication by collective type, and which part of the
  elapsed time grew (transfer, waiting, idle), with its numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from .. import format as fmt
from ..compare import SAME_SHAPE_KINDS, Comparison
from ..compare.attributes import LABELS, shown
from ..compare.comparability import AICORE_FREQ
from .base import ms
from .compute_split import ComputeSplit

# Share of |Δ step| a part needs to be named, and the share the named parts must cover.
NAMED_SHARE = 0.2
COVERED_SHARE = 0.8
STEP_PARTS = (("computing", "computing"), ("communication_not_overlapped",
                                            "exposed communication"),
              ("free", "Free (device idle)"))
BUBBLE = "Bubble"
OTHER_PARTS = (("preparing", "Preparing (host before the first kernel, outside Stage)"),)
MARKS = {"regressed": "regressed", "improved": "improved", "not-significant": "~",
         "untested": "untested", "unchanged": "under the threshold",
         "count-changed": "count changed", "added": "only in new", "removed": "only in base",
         "reshaped": "reshaped"}


@dataclass(frozen=True)
class Part:
    """One signed, named figure of a sentence: µs per step; ``status`` backs an operator."""

    name: str
    delta_us: float
    status: str | None = None
    # What explains most of it (``block dim 32 → 16 on 3 shapes``), when one thing does.
    cause: str | None = None

    def text(self, nested: bool = False) -> str:
        """``name +1.23 ms`` with its status mark and cause, when it has them.

        ``nested``: inside parentheses already, the mark follows a comma.
        """
        mark = MARKS.get(self.status, self.status) if self.status else ""
        head = f"{self.name} {signed_ms(self.delta_us)}"
        if not mark:
            return head + (f": {self.cause}" if self.cause else "")
        mark += f": {self.cause}" if self.cause else ""
        return head + (f", {mark}" if nested else f" ({mark})")


def signed_ms(us: float) -> str:
    """µs as signed ms text: ``+1.23 ms``, ``-0.45 ms``."""
    return f"{fmt.ms(us, signed=True)} ms"


def parts_data(parts: list[Part]) -> list[dict]:
    """The parts as JSON-ready data (``Finding.data["parts"]``)."""
    return [asdict(p) for p in parts]


# --------------------------------------------------------------------------- the step


def _share_named(delta: float, step: float) -> bool:
    """Whether a part holds NAMED_SHARE of |Δ step| as its share is shown (whole percent).

    A part the report shows as "20 %" of the change is named: the rule reads the number
    the reader sees, not its unrounded twin.
    """
    return round(abs(delta) / abs(step) * 100) >= round(NAMED_SHARE * 100)


def step_parts(cmp: Comparison) -> list[Part]:
    """The parts of the step change a sentence must name (see the module docstring).

    Stage = Computing + exposed communication + Free − Bubble: a Bubble part's
    ``delta_us`` is its own change, and it enters the step with the opposite sign
    (``step_sign``); Preparing lies outside Stage.
    """
    s = cmp.step
    step = s.delta_us
    if not math.isfinite(step) or step == 0:
        return []
    parts = [Part(label, s.breakdown[name]["delta_us"]) for name, label in STEP_PARTS
             if not fmt.is_missing(s.breakdown.get(name, {}).get("delta_us"))]
    bubble = s.breakdown.get("bubble", {}).get("delta_us")
    if not fmt.is_missing(bubble) and bubble != 0:
        parts.append(Part(BUBBLE, bubble))
    parts.sort(key=lambda p: -abs(p.delta_us))
    named = [p for p in parts if _share_named(p.delta_us, step)]
    for part in parts:
        if abs(step - sum(step_sign(p) * p.delta_us for p in named)) <= \
                (1 - COVERED_SHARE) * abs(step):
            break
        if part not in named:
            named.append(part)
    named.sort(key=lambda p: -abs(p.delta_us))
    others = [Part(label, s.breakdown[name]["delta_us"]) for name, label in OTHER_PARTS
              if not fmt.is_missing(s.breakdown.get(name, {}).get("delta_us"))
              and _share_named(s.breakdown[name]["delta_us"], step)]
    return named + others


def step_change(figures) -> float:
    """The step change the status follows, in %: the step test's estimate, else the mean's.

    ``figures``: a ``StepComparison`` or its ``StepFigures`` (``all_steps``).
    """
    shift = getattr(figures, "shift_pct", float("nan"))
    return shift if shift == shift else figures.delta_pct


def step_sign(part: Part) -> float:
    """The sign with which a step part enters Δ Stage: −1 for Bubble, +1 for the others."""
    return -1.0 if part.name == BUBBLE else 1.0


# --------------------------------------------------------------------------- computing


def _dominant_status(keys: pd.DataFrame) -> str | None:
    """The status of the key carrying most of a family's effect."""
    if keys.empty:
        return None
    return str(keys.loc[keys["effect"].abs().idxmax(), "status"])


def like_for_like_examples(cmp: Comparison, sign: float, n: int = 3) -> list[Part]:
    """The families whose like-for-like kernels moved most in the direction ``sign``.

    Amounts are the family sums of the per-instance effect (the like-for-like row of
    "Where Δ Computing went", by family), only those of the part's sign; each carries
    the status of the key that moved most that way.
    """
    ops = cmp.operators
    same = ops[ops["match_kind"].isin(SAME_SHAPE_KINDS) & (ops["category"] != "communication")
               & (ops["base_instances"] > 0) & (ops["new_instances"] > 0)]
    keys = pd.DataFrame({"family": same["family"].astype(str),
                         "effect": same["instance_effect_us"].astype(float),
                         "status": same["status"].astype(str)})
    totals = keys.groupby("family")["effect"].sum()
    totals = totals[totals * sign > 0].sort_values(key=abs, ascending=False)
    return [Part(family, float(total), _dominant_status(
        keys[(keys["family"] == family) & (keys["effect"] * sign > 0)]))
        for family, total in totals.head(n).items()]


CAUSES_NAMED = 2


def attribute_causes(cmp: Comparison, families) -> dict[str, str]:
    """Per family of ``families`` that got slower, what explains most of it.

    Among the family's same-shape keys whose instances got slower, the attributes changed
    on keys carrying at least ``Thresholds.cause_share`` of the slowdown (at most ``CAUSES_NAMED``,
    largest effect first), each said with its values: ``block dim 32 → 16 on 3 shapes``.
    Families without such a cause are left out.
    """
    changes = cmp.attributes.changes
    if changes.empty:
        return {}
    ops = cmp.operators
    family = ops["family"].astype(str).to_numpy(dtype=object)
    effect = ops["instance_effect_us"].to_numpy(float)
    slower = (np.isin(family, list(families)) & ops["match_kind"].isin(SAME_SHAPE_KINDS)
              .to_numpy() & (ops["category"] != "communication").to_numpy() & (effect > 0)
              & (ops["base_instances"] > 0).to_numpy() & (ops["new_instances"] > 0).to_numpy())
    keys = pd.DataFrame({"key_id": ops["key_id"].to_numpy()[slower],
                         "family": family[slower], "effect": effect[slower]})
    totals = keys.groupby("family")["effect"].sum()
    held = keys.merge(changes, on="key_id").sort_values("effect", ascending=False,
                                                        kind="stable")
    if held.empty:
        return {}
    by_cause = held.groupby(["family", "attribute"], sort=False)["effect"].sum()
    share_of = totals.reindex(by_cause.index.get_level_values("family")).to_numpy()
    named = by_cause[by_cause.to_numpy() >= cmp.thresholds.cause_share * share_of]
    causes: dict[str, list[str]] = {}
    for (family, attribute), _ in named.sort_values(ascending=False,
                                                    kind="stable").items():  # few
        rows = held[(held["family"] == family) & (held["attribute"] == attribute)]
        causes.setdefault(family, []).append(
            f"{LABELS[attribute]} {_distinct(rows['base'], attribute)} → "
            f"{_distinct(rows['new'], attribute)} on {len(rows)} "
            f"shape{'s' if len(rows) != 1 else ''}")
    return {family: ", ".join(texts[:CAUSES_NAMED]) for family, texts in causes.items()}


def _distinct(values: pd.Series, attribute: str) -> str:
    """The values ``/``-joined in order (per-input lists as ``shown``), repeats dropped."""
    return "/".join(dict.fromkeys(shown(v, attribute) for v in values))


def with_causes(cmp: Comparison, parts: list[Part]) -> list[Part]:
    """Slower parts with the attribute change that explains most of them, when one does."""
    slower = [p.name for p in parts if p.delta_us > 0]
    causes = attribute_causes(cmp, slower) if slower else {}
    return [replace(p, cause=causes.get(p.name)) if p.delta_us > 0 else p for p in parts]


def _one_side_examples(cmp: Comparison, status: str, n: int = 3) -> list[Part]:
    ops = cmp.operators
    rows = ops[(ops["status"] == status) & (ops["category"] != "communication")]
    totals = rows.groupby(rows["family"].astype(str))["delta_us"].sum()
    totals = totals.sort_values(key=abs, ascending=False)
    return [Part(family, float(total)) for family, total in totals.head(n).items()]


def _quoted(examples: list[Part]) -> str:
    return f" ({'; '.join(p.text(nested=True) for p in examples)})" if examples else ""


def compute_parts(cmp: Comparison, split: ComputeSplit) -> tuple[str, list[Part]]:
    """Where Δ Computing went, in words, and the examples it quotes (parts).

    Every sizeable row of the split is said with its sign (its word: fell/rose,
    faster/slower, no longer run/only in new); like-for-like kernels are always named (they
    answer "did the kernels get faster?"), the other rows when they hold at least a tenth
    of the largest row. The parts are the families quoted for a row, each with its sign.
    """
    rows = [("like_for_like_us", split.like_for_like_us), ("removed_us", split.removed_us),
            ("added_us", split.added_us), ("count_changed_us", split.count_changed_us),
            ("reshaped_us", split.reshaped_us), ("mc2_us", split.mc2_us)]
    largest = max((abs(v) for _, v in rows if math.isfinite(v)), default=0.0)
    parts: list[Part] = []
    phrases = []
    rows.sort(key=lambda row: -abs(row[1]) if math.isfinite(row[1]) else 0.0)
    for name, value in rows:
        if not math.isfinite(value) or (name != "like_for_like_us"
                                        and abs(value) < 0.1 * largest) or value == 0:
            continue
        phrases.append(_row_phrase(cmp, name, value, parts))
    delta = split.delta_computing_us
    verb = "fell" if delta < 0 else "rose"
    head = f"computing {verb} by {fmt.ms(abs(delta))} ms" if math.isfinite(delta) else \
        "computing (no step breakdown)"
    return f"{head}: {'; '.join(phrases)}" if phrases else head, parts


def _row_phrase(cmp: Comparison, name: str, value: float, parts: list[Part]) -> str:
    """One row of the compute split as a phrase, its examples appended to ``parts``."""
    amount = f"{fmt.ms(abs(value))} ms"
    if name == "like_for_like_us":
        examples = with_causes(cmp, like_for_like_examples(cmp, math.copysign(1.0, value)))
        parts += examples
        word = "slower" if value > 0 else "faster"
        return f"like-for-like kernels got {amount} {word}{_quoted(examples)}"
    if name in ("removed_us", "added_us"):
        examples = _one_side_examples(cmp, "removed" if name == "removed_us" else "added")
        parts += examples
        where = "kernels no longer run" if name == "removed_us" else "kernels run only in new"
        return f"{fmt.ms(abs(value))} ms of {where}{_quoted(examples)}"
    if name == "count_changed_us":
        return f"{signed_ms(value)} from kernels run more or fewer times per step"
    if name == "reshaped_us":
        return f"{signed_ms(value)} from reshaped kernels (same family, other shapes)"
    return f"{signed_ms(value)} from MC2 fused kernels replaced by split ones"


# --------------------------------------------------------------------------- communication


def collectives_text(cmp: Comparison, parts: list[Part]) -> list[str]:
    """Each collective part as text, its change of count per step after its sign."""
    counts = cmp.comm_types.set_index("comm_type")["delta_count"] \
        if len(cmp.comm_types) else {}
    out = []
    for part in parts:
        more = float(counts.get(part.name, 0.0))
        text = part.text(nested=True)
        if abs(more) > 1e-9:
            extra = f"{abs(more):g} {'more' if more > 0 else 'fewer'} per step"
            head = f"{part.name} {signed_ms(part.delta_us)}"
            text = f"{head}, {extra}{text[len(head):]}"
        out.append(text)
    return out


def collective_parts(cmp: Comparison, n: int = 3) -> list[Part]:
    """The collective types whose exposed time moved most, with their key's status."""
    table = cmp.comm_types
    if table.empty or "delta_exposed_us" not in table:
        return []
    moved = table[table["delta_exposed_us"].fillna(0) != 0]
    moved = moved.reindex(moved["delta_exposed_us"].abs().sort_values(ascending=False).index)
    ops = cmp.operators
    status = ops[ops["category"] == "communication"].groupby(
        ops["op_type"].astype(str))["status"].first()
    return [Part(str(row.comm_type), float(row.delta_exposed_us),
                 str(status.get(str(row.comm_type))) if str(row.comm_type) in status else None)
            for row in moved.head(n).itertuples()]


JSON_SOURCE = "communication.json"
PARTS = (("transit", "transfer"), ("wait", "waiting for a peer"),
         ("idle", "idle between tasks"))


def _direction(cmp: Comparison) -> float:
    """+1 when exposed communication grew (or did not move), −1 when it fell."""
    delta = cmp.step.breakdown.get("communication_not_overlapped", {}).get("delta_us")
    return -1.0 if not fmt.is_missing(delta) and delta < 0 else 1.0


def _grown(cmp: Comparison) -> pd.DataFrame:
    """The collective types that moved the way exposed communication did.

    Grown when it grew (more operations, or more exposed time); fallen when it fell: a fall
    is explained by what fell, never by what grew.
    """
    table = cmp.comm_types
    if _direction(cmp) < 0:
        return table[(table["delta_count"] < -1e-9) | (table["delta_exposed_us"] < 0)]
    return table[(table["delta_count"] > 1e-9) | (table["delta_exposed_us"] > 0)]


def _comm_growth(cmp: Comparison) -> tuple[list[str], dict]:
    parts, data = [], {}
    for row in _grown(cmp).itertuples():
        parts.append(f"{row.comm_type} {row.delta_count:+g}/step ({ms(row.delta_us)} time, "
                     f"{ms(row.delta_exposed_us)} exposed)")
        data[row.comm_type] = {"delta_count": row.delta_count, "delta_us": row.delta_us,
                               "delta_exposed_us": row.delta_exposed_us}
    return parts, data


def parts_source(table: pd.DataFrame) -> str:
    """``hccl_tasks`` when every row's split comes from HCCL tasks, else communication.json.

    The tasks see every plane: a wait on one plane while the others are idle is waiting,
    where communication.json's one-plane figures book it as idle.
    """
    if len(table) and "parts_source" in table and (table["parts_source"] == "hccl_tasks").all():
        return "hccl_tasks"
    return "communication.json"


def _part_sums(table: pd.DataFrame) -> dict[str, dict[str, float]] | None:
    """Transit, wait and idle per step (µs) of both sides, summed over ``table``'s types.

    From the HCCL tasks when every type has them (``parts_source``), else from
    communication.json (elapse = transit + wait + idle there).
    """
    tasks = parts_source(table) == "hccl_tasks"
    column = {"transit": "task_transfer", "wait": "task_wait", "idle": "task_idle"} if tasks \
        else {"transit": "transit", "wait": "wait", "idle": "idle"}
    if not all(f"{side}_{column[part]}_us" in table for side in ("base", "new")
               for part in ("transit", "wait")):
        return None
    sums: dict[str, dict[str, float]] = {}
    for part, _ in PARTS:
        sums[part] = {}
        for side in ("base", "new"):
            name = f"{side}_{column[part]}_us"
            if name in table:
                values = table[name]
            elif part == "idle" and f"{side}_elapse_us" in table:  # elapse = transit+wait+idle
                values = (table[f"{side}_elapse_us"] - table[f"{side}_transit_us"]
                          - table[f"{side}_wait_us"])
            else:
                values = pd.Series(np.nan, index=table.index)
            values = pd.to_numeric(values, errors="coerce")
            sums[part][side] = float(values.fillna(0.0).sum()) if values.notna().any() \
                else float("nan")
    return sums


def _sum(table: pd.DataFrame, column: str) -> float:
    values = pd.to_numeric(table[column], errors="coerce") if column in table else None
    return float(values.sum()) if values is not None and values.notna().any() else math.nan


def task_detail(table: pd.DataFrame) -> str:
    """The data moved over links and the algorithm change of ``table``'s types, or ``""``.

    The link time summed over planes is not said here: beside a wall-clock transfer it
    reads as transfer time (it grows with the planes used while transfer shortens);
    "Where the collectives' time went" shows it, explained.
    """
    if parts_source(table) != "hccl_tasks":
        return ""
    pieces = []
    mb = [_sum(table, f"{side}_task_link_mb") for side in ("base", "new")]
    if all(math.isfinite(v) for v in mb) and max(mb) > 0 and \
            f"{mb[0]:,.1f}" != f"{mb[1]:,.1f}":
        pieces.append(f"data over links {mb[0]:,.1f} → {mb[1]:,.1f} MB per step")
    for row in table.itertuples():
        b, n = getattr(row, "base_algorithm", None), getattr(row, "new_algorithm", None)
        if b and n and b != n:
            pieces.append(f"{row.comm_type} algorithm {b} → {n}")
    return "; ".join(pieces)


def growth_short(cmp: Comparison) -> str:
    """Which part of the collectives' elapsed time moved most, in a few words, or ``""``.

    It moves the way exposed communication did: a fall names the part that fell most.
    """
    kind, _, data = growth_kind(cmp)
    if kind == "unknown":
        return ""
    word = {"transfer": "transfer", "waiting": "waiting for a peer",
            "idle": "idle between tasks"}[kind]
    part = {"transfer": "transit", "waiting": "wait", "idle": "idle"}[kind]
    sums = data["parts"][part]
    verb = "fell" if data.get("direction", 1.0) < 0 else "grew"
    count = {"more": "more operations", "fewer": "fewer operations"}.get(
        data["operations"], "the same count")
    grown = _grown(cmp)
    table = grown if len(grown) else cmp.comm_types
    source = " (HCCL tasks, every plane)" if data.get("source") == "hccl_tasks" else ""
    detail = task_detail(table)
    return (f"{word} {verb} {fmt.ms(sums['base'])} → {fmt.ms(sums['new'])} ms per step"
            f"{source}, with {count}" + (f"; {detail}" if detail else ""))


def growth_kind(cmp: Comparison) -> tuple[str, str, dict]:
    """Which part of the moved communication moved most, in words, and the figures.

    Returns (kind, sentence, data): kind is ``transfer``, ``waiting``, ``idle`` or
    ``unknown`` (no communication.json, or no part moved the way exposed communication
    did); the sentence names it with its numbers and says "more operations", "slower
    transfers" (the same count, transit time grew) or "the same operations" (neither).
    ``data["direction"]`` is +1 when exposed communication grew, −1 when it fell.
    """
    direction = _direction(cmp)
    grown = _grown(cmp)
    more = float(grown["delta_count"].sum()) if len(grown) else 0.0
    table = grown if len(grown) else cmp.comm_types
    sums = _part_sums(table)
    ops = _operations(more, sums)
    data = {"operations": "more" if more > 1e-9 else "fewer" if more < -1e-9 else "slower",
            "parts": sums or {}, "source": parts_source(table), "direction": direction}
    if not sums:
        return "unknown", (f"{ops}; without communication.json transfer, waiting and idle "
                           "time cannot be told apart"), {**data, "kind": "unknown"}
    growth = {part: sums[part]["new"] - sums[part]["base"] for part, _ in PARTS}
    finite = {p: g * direction for p, g in growth.items() if math.isfinite(g)}
    top = max(finite, key=finite.__getitem__) if finite else None
    if top is None or finite[top] <= 0:
        moved = "fell" if direction < 0 else "grew"
        return "unknown", f"{ops}; no part of the elapsed time {moved}", \
            {**data, "kind": "unknown"}
    words = dict(PARTS)
    figures = ", ".join(f"{words[p]} {ms(sums[p]['base'])} → {ms(sums[p]['new'])}"
                        for p, _ in PARTS if p in finite)
    kind = {"transit": "transfer", "wait": "waiting", "idle": "idle"}[top]
    source = "HCCL tasks, every plane" if data["source"] == "hccl_tasks" else JSON_SOURCE
    detail = task_detail(table)
    sign = "-" if direction < 0 else "+"
    return kind, (f"{words[top]} ({sign}{ms(finite[top])} per step; {figures}; from {source}"
                  + (f"; {detail}" if detail else "") + f"), from {ops}"), \
        {**data, "kind": kind}


def _operations(more: float, sums: dict | None) -> str:
    """More or fewer operations, or the same ones: slower transfers when transit grew."""
    if more > 1e-9:
        return f"more operations ({more:+g} per step)"
    if more < -1e-9:
        return f"fewer operations ({more:+g} per step)"
    transit = (sums or {}).get("transit", {})
    grew = math.isfinite(transit.get("new", math.nan) - transit.get("base", math.nan)) and \
        transit["new"] > transit["base"]
    return ("slower transfers (same count per step)" if grew
            else "the same operations (same count per step, transfer did not grow)")


# --------------------------------------------------------------------------- framework


def framework_parts(cmp: Comparison) -> list[Part]:
    """The framework operators (all shapes of a name summed) that carry the step change.

    Each name whose |Δ| holds at least ``NAMED_SHARE`` of |Δ Stage| (of |Δ attributed|
    without step figures), at most three, and the largest always; each carries the status
    of the key that moved most under that name.
    """
    framework = cmp.framework
    if framework is None or framework.operators.empty:
        return []
    ops = framework.operators
    names = ops["name"].astype(str)
    totals = ops["delta_us"].fillna(0.0).groupby(names).sum()
    totals = totals[totals != 0].sort_values(key=abs, ascending=False, kind="stable")
    if totals.empty:
        return []
    summary = framework.summary
    whole = summary.step_delta_us if summary.step_delta_us is not None \
        else summary.delta_attributed_us
    named = [name for name, value in totals.items()
             if abs(value) >= NAMED_SHARE * abs(whole)][:3] or [totals.index[0]]
    moved = ops.assign(_move=ops["delta_us"].fillna(0.0).abs())
    status = moved.sort_values("_move", ascending=False, kind="stable").groupby(
        names, sort=False)["status"].first()
    return [Part(str(name), float(totals[name]), str(status[name])) for name in named]


def framework_sentence(cmp: Comparison) -> str:
    """How much of Δ Stage the framework operators explain, by whom, and what is left."""
    framework = cmp.framework
    if framework is None:
        return ""
    summary = framework.summary
    parts = framework_parts(cmp)
    who = f": {'; '.join(p.text() for p in parts)}" if parts else ""
    explained = f"{fmt.ms(summary.delta_attributed_us, signed=True)}"
    if summary.step_delta_us is None or summary.outside_us is None:
        return (f"Framework operators' device time changed by {explained} ms per step"
                f"{who}.")
    return (f"Framework operators explain {explained} of the "
            f"{fmt.ms(summary.step_delta_us, signed=True)} ms step change{who}; "
            f"{signed_ms(summary.outside_us)} is outside every operator's device time "
            "(Free, and time where kernels overlap).")


# --------------------------------------------------------------------------- comparability

# A value longer than this, or a list (the dtype mix), is left to the comparability table.
SHORT_VALUE = 24


def _short(value: str) -> str:
    """A value without its explanation in parentheses (``Ascend910A-class (…)``)."""
    return value.split(" (")[0]


def _clock(base: str, new: str) -> str:
    """`` (…× as long …)`` for two AI Core frequencies in MHz, else ``""``."""
    try:
        ratio = float(base.split()[0]) / float(new.split()[0])
    except (ValueError, IndexError, ZeroDivisionError):
        return ""
    return (f" (the same cycles take {ratio:.2f}× as long on every AI Core kernel: a uniform "
            f"{'slowdown' if ratio > 1 else 'speed-up'})")


def comparability_sentence(cmp: Comparison) -> str:
    """``Not a like-for-like stack upgrade: …`` naming every difference, or ``""``.

    An AI Core clock change is said with the factor it scales every AI Core kernel by.
    """
    if not cmp.comparability:
        return ""
    named = []
    for c in cmp.comparability:
        base, new = _short(c.base), _short(c.new)
        plain = max(len(base), len(new)) <= SHORT_VALUE and "," not in base + new
        clock = _clock(base, new) if c.what == AICORE_FREQ else ""
        named.append(f"{c.what} {base} → {new}{clock}" if plain else c.what)
    return (f"Not a like-for-like stack upgrade: {'; '.join(named)} "
            f"{'differs' if len(named) == 1 else 'differ'} too.")
