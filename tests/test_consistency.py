"""The consistency law: a quantity the report shows twice is the same number.

Every pair PROVENANCE.md lists in ../shared/realdata (both orders, text and db) and the
shipped examples run through the library; each check reads what a reviewer reads — the
verdict, a finding's title, detail and data, the step table and the section tables — and
holds the figures against each other at display precision (ms with two decimals):

* the verdict's step figures and every part it names are the step table's; its causes
  (report.json ``verdict``) are those parts, largest first, each share its Δ over Δ Stage,
  and report.md lists each as it is in report.json;
* each collective type a sentence names is its row of Communication by type, and the
  types' exposed time adds up to the step table's exposed communication;
* waiting, transfer and idle are one source: the verdict's, the per-type table's, the
  per-rank table's and the collectives section's agree;
* Free is one figure: the step table's, the host-bound finding's and "Where Free went";
  its parts add up to it;
* a finding's title counts the rows of the status it names; the count-changed finding's
  count effect is the compute split's;
* the parts a sentence adds up cover the Δ it explains (Stage = span − Bubble said the
  way it adds), and no sentence explains a fall by a part that grew.
"""

from __future__ import annotations

import re
import shutil
import statistics
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, REALDATA, needs_realdata

from cann_diff import format as fmt
from cann_diff.pipeline import Options, diff
from cann_diff.render.markdown import render_markdown

MI25 = "Ascend__msinsight/test/data/pytorch"
MI24 = "Ascend__msinsight@c1e639ee2/test/data/pytorch"
ST = "Ascend__msinsight/test/st/level2"
ADVICE = "Ascend__msprof-analyze/test/ut/advisor"
VLLM = "vllm-project__vllm-ascend/.tmp_remote_patch/prof_unpack/PROF_GROUP_20260823_165254"
HTA = "facebookresearch__HolisticTraceAnalysis/tests/data/trace_compare"

# (id, base, new) relative to ../shared/realdata: the pairs PROVENANCE.md lists.
REAL_PAIRS = [
    ("2025-text-L1-vs-L2", f"{MI25}/text/level1", f"{MI25}/text/level2"),
    ("2025-db-L1-vs-L2", f"{MI25}/db/level1", f"{MI25}/db/level2"),
    ("2025-text-L0-vs-L1", f"{MI25}/text/level0", f"{MI25}/text/level1"),
    ("2025-text-vs-db-L1", f"{MI25}/text/level1", f"{MI25}/db/level1"),
    ("st-rank0-vs-rank2", f"{ST}/rank_0_ascend_pt", f"{ST}/rank_2_ascend_pt"),
    ("2024-2025-text-L0", f"{MI24}/text/level0", f"{MI25}/text/level0"),
    ("2024-2025-text-L1", f"{MI24}/text/level1", f"{MI25}/text/level1"),
    ("2024-2025-db-L0", f"{MI24}/db/level0", f"{MI25}/db/level0"),
    ("2024-2025-db-L1", f"{MI24}/db/level1", f"{MI25}/db/level1"),
    ("2024-2025-text-L1-rank0", f"{MI24}/text/level1/rank0_ascend_pt",
     f"{MI25}/text/level1/rank0_ascend_pt"),
    ("2024-2025-db-L1-rank0", f"{MI24}/db/level1/rank0_ascend_pt",
     f"{MI25}/db/level1/rank0_ascend_pt"),
    ("2024-text-vs-db-L1", f"{MI24}/text/level1", f"{MI24}/db/level1"),
    ("vllm-metrics", f"{VLLM}/PROF_ArithmeticUtilization", f"{VLLM}/PROF_Memory"),
    ("advice-2023-vs-2025", f"{ADVICE}/advisor_backend/compute_advice/kernel_details.csv",
     f"{ADVICE}/compute_advice/data/kernel_details.csv"),
    ("hta-base-vs-test", f"{HTA}/base", f"{HTA}/test"),
]
EXAMPLE_PAIRS = [("example-rc2", "cann7.0.1.3", "cann8.0.RC2"),
                 ("example-mc2", "cann7.0.1.3", "cann8.0.RC2-mc2"),
                 ("example-rc2-vs-mc2", "cann8.0.RC2", "cann8.0.RC2-mc2")]

_CACHE: dict[tuple[str, str], tuple] = {}
_HOLDER = tempfile.TemporaryDirectory(prefix="consistency-")


def _profile(path: Path) -> Path:
    """A lone kernel_details.csv (a test fixture of its repository) as a profile directory."""
    if path.is_dir():
        return path
    target = Path(_HOLDER.name) / str(abs(hash(str(path)))) / "ASCEND_PROFILER_OUTPUT"
    if not target.exists():
        target.mkdir(parents=True)
        shutil.copy(path, target / path.name)
    return target.parent


def _report(base, new):
    key = (str(base), str(new))
    if key not in _CACHE:
        result = diff(_profile(base), _profile(new), Options(base_label="base",
                                                               new_label="new"))
        _CACHE[key] = (result.report, render_markdown(result.report))
    return _CACHE[key]


def _cases():
    for name, base, new in REAL_PAIRS:
        for order, (b, n) in (("", (base, new)), ("-reversed", (new, base))):
            yield pytest.param(REALDATA / b, REALDATA / n, id=name + order,
                               marks=[needs_realdata, pytest.mark.slow])
    for name, base, new in EXAMPLE_PAIRS:
        for order, (b, n) in (("", (base, new)), ("-reversed", (new, base))):
            yield pytest.param(EXAMPLES / b, EXAMPLES / n, id=name + order,
                               marks=pytest.mark.slow)


CASES = list(_cases())
MS = r"([+-]?[\d,]+\.\d\d) ms"


def _ms(text: str) -> float:
    return float(text.replace(",", ""))


def _same(shown: str, us: float | None, signed: bool = False) -> None:
    """The text ``shown`` is ``us`` at display precision."""
    assert shown == fmt.ms(us, signed=signed), (shown, us)


def _close(a_us: float, b_us: float, terms: int = 2) -> None:
    """Two figures agree to the rounding of ``terms`` displayed numbers (0.005 ms each)."""
    assert abs(a_us - b_us) <= 5.0 * terms + 1e-6, (a_us, b_us)


def _verdict(report) -> str:
    return report.headline


@pytest.mark.parametrize("base, new", CASES)
def test_the_verdict_quotes_the_step_table(base, new):
    report, _ = _report(base, new)
    s, text = report.step, _verdict(report)
    found = re.search(r"\(" + r"([\d,]+\.\d\d) → ([\d,]+\.\d\d) ms per step", text)
    if s.base_us is None or s.new_us is None:
        return
    assert found, text
    _same(found.group(1), s.base_us)
    _same(found.group(2), s.new_us)
    # the change the verdict states is the one the status follows (the step test's)
    stated = re.search(r" is (?:only )?([\d.]+)% (slower|faster) than ", text)
    if stated:
        assert float(stated.group(1)) == round(abs(s.change_pct), 1), (text, s.change_pct)
        assert (stated.group(2) == "slower") == (s.change_pct > 0)
    breakdown = s.breakdown
    for pattern, figure in ((r"computing " + MS, breakdown.computing),
                            (r"exposed communication " + MS,
                             breakdown.communication_not_overlapped),
                            (r"Free \(device idle\) " + MS, breakdown.free),
                            (r"less Bubble " + MS, breakdown.bubble)):
        for match in re.finditer(pattern, text):
            _same(match.group(1), figure.delta_us, signed=True)
    grew = re.search(r"exposed communication grew by " + MS, text)
    if grew:
        _same(grew.group(1), breakdown.communication_not_overlapped.delta_us)


PART_ROWS = {"computing": "computing", "exposed communication": "communication_not_overlapped",
             "Free (device idle)": "free", "Bubble": "bubble"}


@pytest.mark.parametrize("base, new", CASES)
def test_the_verdict_causes_are_the_step_table_rows(base, new):
    report, md = _report(base, new)
    v, s = report.verdict, report.step
    if s.base_us is not None and s.new_us is not None:
        assert f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step" in v.line
    stated = re.search(r" is (?:only )?([\d.]+)% (slower|faster) than ", v.line)
    if stated:
        assert float(stated.group(1)) == round(abs(s.change_pct), 1), (v.line, s.change_pct)
    assert len(v.causes) <= 4
    assert [abs(c.delta_us) for c in v.causes] == sorted((abs(c.delta_us) for c in v.causes),
                                                         reverse=True)
    head = md[:md.index("\n## ")]
    for cause in v.causes:
        if cause.name in PART_ROWS:
            row = getattr(s.breakdown, PART_ROWS[cause.name])
            _same(fmt.ms(cause.delta_us, signed=True), row.delta_us, signed=True)
            sign = -1.0 if cause.name == "Bubble" else 1.0
            assert cause.share == pytest.approx(sign * row.delta_us / s.delta_us, rel=1e-9)
        shown = f"- **{cause.name} {fmt.ms(cause.delta_us, signed=True)} ms** "
        assert shown in md.replace("\\", ""), shown
        assert cause.text.startswith(f"{cause.name} {fmt.ms(cause.delta_us, signed=True)} ms (")
    assert head.count("**Verdict:**") == 1


@pytest.mark.parametrize("base, new", CASES)
def test_collectives_named_are_their_rows_and_add_up_to_exposed_communication(base, new):
    report, _ = _report(base, new)
    rows = {c.comm_type: c for c in report.communication}
    exposed = re.search(r"exposed communication [^(]*\((.*)", _verdict(report))
    if exposed:
        for name, shown in re.findall(r"(\w+) " + MS, exposed.group(1).split(";")[0]):
            if name in rows and rows[name].delta_exposed_us is not None:
                _same(shown, rows[name].delta_exposed_us, signed=True)
    every = report.step.all_steps or report.step
    kernels = [c for c in report.communication if c.base_exposed_us is not None]
    if not kernels or not len(report.operators):
        return
    breakdown = report.step.breakdown.communication_not_overlapped
    for side in ("base", "new"):
        total = sum(getattr(c, f"{side}_exposed_us") or 0.0 for c in kernels)
        figure = getattr(breakdown, f"{side}_us")
        if figure is not None and getattr(every, f"{side}_us") is not None and total:
            _close(total, figure, terms=len(kernels) + 1)


@pytest.mark.parametrize("base, new", CASES)
def test_waiting_transfer_and_idle_come_from_one_source(base, new):
    report, markdown = _report(base, new)
    tasks = [c for c in report.communication if c.parts_source == "hccl_tasks"]
    for c in tasks:
        parts = c.parts["hccl_tasks"]
        for side in ("base", "new"):
            # the per-type row shows the tasks' figures, the same as the section's
            assert getattr(c, f"{side}_wait_us") == pytest.approx(parts[side].wait_us)
            assert getattr(c, f"{side}_transit_us") == pytest.approx(parts[side].transfer_us)
            assert getattr(c, f"{side}_idle_us") == pytest.approx(parts[side].idle_us)
    waiting = re.search(r"waiting for a peer (?:grew|fell) " + r"([\d,]+\.\d\d) → "
                        r"([\d,]+\.\d\d) ms per step", _verdict(report))
    if waiting and tasks and len(tasks) == len(report.communication):
        _same(waiting.group(1), sum(c.base_wait_us for c in tasks))
        _same(waiting.group(2), sum(c.new_wait_us for c in tasks))
    ranks = [r for r in report.ranks if r.base_parts_source == "hccl_tasks"
             and r.new_parts_source == "hccl_tasks"]
    if tasks and ranks and len(ranks) == len(report.ranks) and \
            len(tasks) == len(report.communication):
        for side in ("base", "new"):
            per_rank = statistics.mean(getattr(r, f"{side}_wait_us") for r in ranks)
            _close(per_rank, sum(getattr(c, f"{side}_wait_us") for c in tasks),
                   terms=len(ranks) + len(tasks))
    assert "summed over planes" not in _verdict(report)


@pytest.mark.parametrize("base, new", CASES)
def test_free_is_one_figure(base, new):
    report, _ = _report(base, new)
    free = report.step.breakdown.free
    for finding in report.findings:
        if finding.id != "host-bound":
            continue
        title = re.search(r"Free grew " + MS, finding.title)
        assert title, finding.title
        _same(title.group(1), free.delta_us)
        grew = re.search(r"Free \(device idle\) grew " + MS + " → " + MS, finding.detail)
        assert grew, finding.detail
        _same(grew.group(1), free.base_us)
        _same(grew.group(2), free.new_us)
    if report.free is None:
        return
    for side in ("base", "new"):
        figures = getattr(report.free, side)
        if figures.free_us is None:
            continue
        _close(figures.free_us, getattr(free, f"{side}_us"), terms=2)
        if figures.host_bound_us is not None and figures.free_other_us is not None:
            _close(figures.host_bound_us + figures.free_other_us, figures.free_us, terms=3)
    more = re.search(MS + r" (more|less) waiting for the host's launches", _verdict(report))
    if more:
        bound = report.free.new.host_bound_us - report.free.base.host_bound_us
        _same(more.group(1), abs(bound))
        assert (more.group(2) == "more") == (bound > 0)


TITLE_COUNTS = {"op-regression": "regressed", "op-improvement": "improved",
                "count-changed": "count-changed", "new-ops": "added",
                "removed-ops": "removed"}


@pytest.mark.parametrize("base, new", CASES)
def test_finding_titles_count_the_rows_they_name(base, new):
    report, _ = _report(base, new)
    for finding in report.findings:
        status = TITLE_COUNTS.get(finding.id)
        if status is None:
            continue
        count = int(re.match(r"(\d+)", finding.title).group(1))
        rows = [o for o in report.operators if o.status == status]
        assert count == len(rows), (finding.title, len(rows))


@pytest.mark.parametrize("base, new", CASES)
def test_the_compute_split_adds_up_and_the_count_effect_is_its_row(base, new):
    report, _ = _report(base, new)
    split = report.compute
    if split is None or split.delta_computing_us is None:
        return
    rows = {r.part: r.delta_us for r in split.rows}
    assert sum(v for v in rows.values() if v is not None) == \
        pytest.approx(split.delta_computing_us, abs=1e-6)
    for finding in report.findings:
        if finding.id == "count-changed":
            effect = re.search(r"count effect " + MS, finding.detail)
            if effect:
                _same(effect.group(1), rows["count_changed_us"], signed=True)


def _segments(text: str) -> list[str]:
    """The verdict's parts: its text after the first ``): `` split at top-level ``;``."""
    head, _, tail = text.partition("): ")
    if not tail:
        return []
    depth, start, out = 0, 0, []
    for i, char in enumerate(tail):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            out.append(tail[start:i].strip())
            start = i + 1
    out.append(tail[start:].strip())
    return out


@pytest.mark.parametrize("base, new", CASES)
def test_no_sentence_explains_a_fall_by_what_grew(base, new):
    report, _ = _report(base, new)
    for segment in _segments(_verdict(report)):
        first = re.match(r"(?:less )?[A-Za-z ()]+? " + MS + r"(?: \((.*)\))?", segment)
        if not first or not first.group(2):
            continue
        value, inside = _ms(first.group(1)), first.group(2)
        if value < 0:
            assert not re.search(r"\bgrew\b|\bmore waiting\b", inside), segment
        elif value > 0:
            assert not re.search(r"\bfell\b|\bless waiting\b", inside), segment


@pytest.mark.parametrize("base, new", CASES)
def test_the_named_parts_add_up_to_the_step_change(base, new):
    report, _ = _report(base, new)
    s = report.step
    if s.status == "unchanged" or s.delta_us is None or not s.delta_us:
        return
    named = 0.0
    for segment in _segments(_verdict(report)):
        for label, field, sign in (("computing", "computing", 1),
                                   ("exposed communication", "communication_not_overlapped", 1),
                                   ("Free (device idle)", "free", 1),
                                   ("less Bubble", "bubble", -1)):
            if segment.startswith(label + " "):
                named += sign * s.breakdown.get(field).delta_us
    if "comm-hides-compute" in {f.id for f in report.findings}:
        return  # that verdict leads with the kernel gain it hid, a part of computing
    assert abs(s.delta_us - named) <= 0.2 * abs(s.delta_us) + 10.0, (_verdict(report), named)
