"""cann-diff command line: parse, check, call the library, write. Nothing else.

Exit codes: 0 report written and no gate failed; 1 ``--fail-on-regression`` gate
failed (the step regressed significantly by at least PCT); 2 bad input or usage; 3 internal
error; 130 / 143 interrupted by SIGINT / SIGTERM. ``Command.invoke`` is the one place that
turns an exception into its exit code.

The pipeline (pandas, scipy, matplotlib) is imported inside the command, so that
``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import BrokenExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from . import format as fmt
from .errors import (
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_SIGINT,
    CannDiffError,
    Terminated,
    UsageError,
    one_line,
)
from .render.files import (
    check_inputs,
    check_junit,
    check_output_dir,
    fit_name,
    safe_name,
    staged_report,
    unique_names,
)
from .settings import Thresholds

DEBUG_VARIABLE = "CANN_DIFF_DEBUG"
# A signal sent to the whole process group can stop a worker before this process runs its
# own handler: the pool then breaks first. This long, the parent's own signal may still come.
SIGNAL_GRACE_S = 0.5


def _finite(value: str, option: str, what: str, number_text: str | None = None) -> float:
    """The option's value (``number_text`` of it) as a finite float, else a UsageError."""
    text = str(value).strip() if number_text is None else number_text
    # ASCII only: float() also reads Arabic-Indic "٥" or full-width "５" as 5.
    if not text.isascii():
        raise UsageError(option, f"{value!r} is not {what}")
    try:
        number = float(text)
    except ValueError:
        raise UsageError(option, f"{value!r} is not {what}") from None
    if not math.isfinite(number):  # nan compares false with every bound: it would pass them
        raise UsageError(option, f"{value!r} is not a finite number")
    return number


def _percent(value: str, option: str) -> float:
    number = _finite(value, option, "a percentage (e.g. 5 or 5%)",
                     str(value).strip().removesuffix("%"))
    if number < 0:
        raise UsageError(option, "must not be negative")
    return number


def _count(value: str, option: str) -> int:
    """A whole number ≥ 1 (``--top``, ``--jobs``)."""
    text = str(value).strip()
    if not re.fullmatch(r"[+]?[0-9]{1,18}", text):  # ASCII digits: int() reads "٥" as 5
        raise UsageError(option, f"{value!r} is not a whole number (e.g. 4)")
    if int(text) < 1:
        raise UsageError(option, "must be at least 1")
    return int(text)


def _alpha(value: str) -> float:
    number = _finite(value, "--alpha", "a number (e.g. 0.05)")
    if not 0 < number < 1:
        raise UsageError("--alpha", "must lie strictly between 0 and 1")
    return number


def _seconds(value: str, option: str) -> float:
    number = _finite(value, option, "a number of seconds (e.g. 10)")
    if number <= 0:
        raise UsageError(option, "must be more than 0 seconds")
    return number


def _scheduler(address: str | None) -> str | None:
    """The ``--scheduler`` address, checked before anything is read or connected."""
    if address is None:
        return None
    from .read.execute import scheduler_address_problem

    problem = scheduler_address_problem(address.strip())
    if problem:
        raise UsageError("--scheduler", f"{address!r}: {problem}")
    return address.strip()


def _agg_fallback() -> str | None:
    """Draw with Agg when ``MPLBACKEND`` names no backend; the warning to show, or None.

    matplotlib reads ``MPLBACKEND`` when it is imported and refuses an unknown name with a
    ValueError before charts.py can choose Agg. The name is checked with the variable out
    of the way; an unknown one is replaced by Agg (for the workers too, which inherit it).
    """
    wanted = os.environ.get("MPLBACKEND")
    if not wanted or "matplotlib" in sys.modules:
        return None
    del os.environ["MPLBACKEND"]
    try:
        from matplotlib import rcsetup

        rcsetup.validate_backend(wanted)
    except ImportError:  # no matplotlib: --no-charts is the only way anyway
        os.environ["MPLBACKEND"] = wanted
        return None
    except ValueError:
        os.environ["MPLBACKEND"] = "Agg"
        return f"MPLBACKEND={wanted!r} is not a matplotlib backend; charts are drawn with Agg"
    os.environ["MPLBACKEND"] = wanted
    return None


# A step number: ASCII digits only. str.isdigit and \d also take "²" or "٥", which int()
# then refuses or reads as another digit; 18 digits keep it an int64 (and int() far from
# its 4,300-digit limit).
STEP_NUMBER = "[0-9]{1,18}"
STEP_PART = re.compile(rf"(?P<low>{STEP_NUMBER})?\s*(?P<dash>-)?\s*(?P<high>{STEP_NUMBER})?")


def parse_steps(spec: str) -> list[tuple[int | None, int | None]]:
    """``"5-7,9"`` → [(5, 7), (9, 9)]; ``"3-"`` = step 3 onward; ``"-4"`` = up to 4.

    An empty SPEC is refused, not read as "every step": leaving ``--steps`` out is how to
    ask for every step (after screening).
    """
    if not spec.strip():
        raise UsageError("--steps", "is empty: give steps such as 5-7,9 or 3-, or leave "
                                    "--steps out to compare every step (warm-up screened)")
    ranges: list[tuple[int | None, int | None]] = []
    for part in spec.split(","):
        part = part.strip()
        match = STEP_PART.fullmatch(part)
        if match is None or not (match["low"] or match["high"]) or \
                (match["low"] and match["high"] and not match["dash"]):
            raise UsageError("--steps", f"{fmt.clip(part, 40)!r}: use step numbers (digits "
                                        "0-9) and ranges, e.g. 5-7,9 or 3-")
        low, high = (int(match[g]) if match[g] else None for g in ("low", "high"))
        ranges.append((low, low) if not match["dash"] else (low, high))
    return ranges


class RankBars:
    """A progress bar per input whose ranks are being read, at the ranks read so far.

    Ranks read in worker processes come back a chunk at a time: the bar moves to each
    count it is told, not by one per call (which left it near 0 % and its time left
    far off).
    """

    def __init__(self, file):
        self.file = file
        self.bars: dict[str, Any] = {}

    def __call__(self, side: str, done: int, total: int) -> None:
        """``done`` of ``total`` ranks of ``side`` read; no bar for a single rank."""
        if total < 2:
            return
        bar = self.bars.get(side)
        if bar is None:
            bar = self.bars[side] = click.progressbar(length=total, file=self.file,
                                                      label=f"reading {side} ranks")
            bar.__enter__()
        bar.update(done - bar.pos)
        if done == total:
            bar.__exit__(None, None, None)


def _screen(report, out_dir: Path) -> str:
    """The verdict as the report opens with it: its line, causes, caveats; the findings."""
    v = report.verdict
    lines = [fmt.visible(v.line if v is not None else report.headline)]
    if v is not None:
        lines += [f"  {fmt.visible(c.text)}" for c in v.causes]
        lines += [f"  {fmt.visible(v.memory)}"] if v.memory else []
        lines += [f"⚠ {fmt.visible(c.text)}" for c in v.caveats]
    findings = [f"  [{f.severity}] {f.id}: {fmt.visible(f.title)}" for f in report.findings[:5]]
    lines += ["", *findings] if findings else []
    lines += ["", f"report: {fmt.visible(str(out_dir / 'report.md'))}"]
    return "\n".join(lines)


def _write_report(result, out_dir: Path, charts_wanted: bool, html_wanted: bool = True,
                  workers: Any = None) -> None:
    from .render import write_report

    write_report(result.report, out_dir, charts_wanted, html=html_wanted, workers=workers)


# What a chart worker imports (the forkserver's preload): the charts, and the pipeline a
# rank or side worker from the same forkserver needs.
CHART_PRELOAD = ("cann_diff.pipeline", "cann_diff.render.charts")
# A report has at most this many charts (``chart_list.WANTED``).
CHART_WORKERS_MAX = 9


def _chart_workers(jobs: int, charts_wanted: bool) -> int:
    """Worker processes to draw every chart: ``jobs``; 0 (drawn here) with one job.

    Also 0 without a forkserver. A report's charts cost 1.1-1.6 s of matplotlib CPU on
    one core. The workers draw them all, and this process imports no matplotlib (0.5 s;
    docs/performance.md, Turn 11). Where they are drawn, the forkserver is started now:
    its imports then run beside this process's (a worker spawned without one would
    import everything again when needed).
    """
    if not charts_wanted or jobs < 2:
        return 0
    from .processes import start_forkserver

    return min(jobs, CHART_WORKERS_MAX) if start_forkserver(CHART_PRELOAD) else 0


# What a rank or side worker imports (the forkserver's preload) when no chart is drawn.
READ_PRELOAD = ("cann_diff.pipeline",)


def _reading_workers(inputs: list, jobs: int, scheduler: str | None) -> None:
    """Start the forkserver now when reading the inputs will likely want worker processes.

    Its imports (≈ 0.5 s) then run beside this process's own instead of after them, when
    the first input's ranks are found or the sides go to side workers. Only on a quick
    look's say-so
    (``costs.workers_likely``): a forkserver no worker uses cost a small pair 5-10 % of
    its wall time (docs/performance.md, Turn 13).
    """
    from .costs import workers_likely
    from .settings import DEFAULT_LIMITS

    if scheduler or not workers_likely(inputs, jobs, DEFAULT_LIMITS.rank_pool_min_s):
        return
    from .processes import start_forkserver

    start_forkserver(READ_PRELOAD)


# Options that change how the tool runs, not what the report says.
NOT_RECORDED = ("quiet", "jobs", "scheduler", "scheduler_timeout")


def _command_line(ctx: click.Context) -> str:
    """The command as given: the arguments and every option not left at its default."""
    words = ["cann-diff"]
    for param in ctx.command.params:
        if param.name in NOT_RECORDED:
            continue
        value = ctx.params.get(param.name)
        source = ctx.get_parameter_source(param.name)
        if source in (None, click.core.ParameterSource.DEFAULT) or value is None \
                or value is False:
            continue
        if isinstance(param, click.Option):
            words.append(max(param.opts, key=len))
        if getattr(param, "is_flag", False):
            continue
        words += [str(v) for v in value] if isinstance(value, tuple) else [str(value)]
    return shlex.join(words)


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


class Command(click.Command):
    """The click command, with the one site that turns an exception into an exit code."""

    def invoke(self, ctx: click.Context):
        """Run the command; exit with the code its error carries (errors.py)."""
        # SIGTERM (CI cancelling a job, kill) raises like Ctrl-C, so temporary files go.
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            try:
                return super().invoke(ctx)
            except BrokenExecutor:
                time.sleep(SIGNAL_GRACE_S)  # the group's SIGTERM / SIGINT raises here
                raise
        except CannDiffError as exc:
            click.echo(f"cann-diff: error: {fmt.visible(str(exc))}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Terminated
            click.echo("cann-diff: interrupted", err=True)
            sys.exit(getattr(exc, "exit_code", EXIT_SIGINT))
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own usage errors and exits
        except Exception as exc:
            # A bug must not read as exit 1, which a CI gate takes for a regression.
            if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
                click.echo(traceback.format_exc().rstrip(), err=True)
            click.echo(f"cann-diff: internal error: {type(exc).__name__}: "
                       f"{one_line(str(exc))} — please report it "
                       f"(set {DEBUG_VARIABLE}=1 for the traceback)", err=True)
            sys.exit(EXIT_INTERNAL)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)


def _show_version(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from . import __version__

        click.echo(f"cann-diff, version {__version__}")
        ctx.exit()


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path),
              help="Output directory [default: reports/<base-label>_vs_<new-label>/].")
@click.option("--base-label", help="Name of the base run in the report [default: dir name].")
@click.option("--new-label", help="Name of the new run (one NEW) [default: dir name].")
@click.option("--labels", "labels_spec", metavar="A,B,..",
              help="Names of BASE and every NEW, in order, comma-separated.")
@click.option("--top", "top_n", default="15", show_default=True, metavar="N",
              help="Rows in the top regressions/improvements tables (at least 1).")
@click.option("--steps", "steps_spec", help="Steps to compare, e.g. 5-7,9 or 3- (skip warm-up).")
@click.option("--alpha", default="0.05", show_default=True, metavar="A",
              help="Significance level, strictly between 0 and 1.")
@click.option("--threshold", "threshold", default="5%", show_default=True,
              help="Smallest per-instance operator change called a regression/improvement.")
@click.option("--step-threshold", "step_threshold", default="2%", show_default=True,
              help="Smallest step-time change called a regression/improvement.")
@click.option("--fail-on-regression", "fail_pct", metavar="PCT",
              help="Exit 1 when the step time regressed significantly by at least PCT.")
@click.option("--fusion-map", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON file adding MC2 fused ops to the built-in table.")
@click.option("--alias-map", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON file of operator family aliases {\"Gemm\": \"MatMul\"}.")
@click.option("-j", "--jobs", default=str(os.cpu_count() or 1), metavar="N",
              show_default="number of cores",
              help="Processes for reading ranks and drawing charts (1: all in this one).")
@click.option("--scheduler", metavar="ADDRESS",
              help="Read ranks on this Dask scheduler, tcp://HOST:PORT "
                   "(pip install 'cann-diff[dask]').")
@click.option("--scheduler-timeout", "scheduler_timeout", default="10", show_default=True,
              metavar="SECONDS", help="Seconds to wait for the Dask scheduler to answer.")
@click.option("--junit", "junit_path", metavar="FILE",  # checked by check_junit: one line
              type=click.Path(path_type=Path),
              help="Also write the gate as JUnit XML (a testsuite per candidate).")
@click.option("--ladder", is_flag=True,
              help="NEW are ordered steps of one upgrade path: compare each with the one "
                   "before it, and BASE with the last (the gate).")
@click.option("--no-charts", is_flag=True, help="Skip the PNG charts.")
@click.option("--no-html", is_flag=True, help="Skip report.html (one self-contained file).")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress or warnings on stderr (progress shows only on a terminal).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_show_version, help="Show the version and exit.")
def main(base, new, out_dir, base_label, new_label, labels_spec, top_n, steps_spec, alpha,
         threshold, step_threshold, fail_pct, fusion_map, alias_map, jobs, scheduler,
         scheduler_timeout, junit_path, ladder, no_charts, no_html, quiet):
    """Compare Ascend NPU profiles: BASE (current stack) and NEW (one or more candidates).

    Writes a Markdown + PNG + JSON report of what changed and why. With several NEW,
    each candidate's full report goes to OUT/<base>_vs_<candidate>/ and OUT holds a
    summary with one column per candidate. With --ladder, BASE NEW1 NEW2 … are the steps
    of one upgrade path: OUT/<a>_vs_<b>/ for each step and for BASE vs the last, and a
    summary of which step moved what. BASE and NEW are
    each a profile as the profiler wrote it: a *_ascend_pt or *_ascend_ms directory
    (text or db export), a directory of them (one per rank), an ASCEND_PROFILER_OUTPUT
    directory, an msprof PROF_* directory, a trace_view.json or GPU Kineto trace
    (.json/.json.gz), or an msprof-analyze cluster_analysis_output.

    \b
    Exit codes:
      0    report written, no gate failed
      1    --fail-on-regression PCT: the step regressed significantly by >= PCT
      2    bad input or usage (one line on stderr naming the file and the problem)
      3    internal error, a bug (one line; CANN_DIFF_DEBUG=1 shows the traceback)
      130  interrupted by SIGINT (Ctrl-C): no partial report or temp file left
      143  terminated by SIGTERM: no partial report or temp file left
    """  # noqa: D301 (click's \b: a paragraph it must not rewrap)
    # Every value checked before anything is read: a typo costs one line, not a run.
    news = list(new)
    if ladder and len(news) < 2:
        raise UsageError("--ladder", "needs BASE and at least two steps after it "
                                     "(BASE STEP1 STEP2 …)")
    labels = _labels(labels_spec, base_label, new_label, len(news))
    gate = _percent(fail_pct, "--fail-on-regression") if fail_pct is not None else None
    # The gate is part of the step verdict: the status says "regressed" whenever it fails.
    # An explicit --steps choice replaces the screening of warm-up steps.
    thresholds = Thresholds(alpha=_alpha(alpha), threshold_pct=_percent(threshold, "--threshold"),
                            step_threshold_pct=_percent(step_threshold, "--step-threshold"),
                            fail_on_regression_pct=gate, screen_steps=steps_spec is None,
                            top_n=_count(top_n, "--top"))
    steps = parse_steps(steps_spec) if steps_spec is not None else None
    jobs = _count(jobs, "--jobs")
    timeout_s = _seconds(scheduler_timeout, "--scheduler-timeout")
    inputs = [base, *news]
    check_inputs(inputs)  # a symlink loop: one line now, not a traceback from a reader
    if junit_path is not None:  # again below once a default OUT is known
        check_junit(junit_path, out_dir, [*inputs, *filter(None, (fusion_map, alias_map))])
    # Here, not at the top: --help stays fast. The allocator first, before pyarrow loads.
    from .allocator import tune

    tune()
    scheduler = _scheduler(scheduler)
    fallback = _agg_fallback() if not no_charts else None
    if fallback and not quiet:
        click.echo(f"cann-diff: warning: {fallback}", err=True)
    chart_workers = _chart_workers(jobs, not no_charts)  # MPLBACKEND settled: they inherit it
    if not chart_workers:
        _reading_workers(inputs, jobs, scheduler)
    from .pipeline import Options, diff_candidates, diff_ladder
    from .report import Invocation
    from .settings import Limits

    started = time.monotonic()

    watching = not quiet and sys.stderr.isatty()

    def progress(message: str) -> None:
        if watching:  # progress is for a person at a terminal, not for CI logs
            click.echo(f"[{time.monotonic() - started:5.1f}s] {message}", err=True)

    # A bar only where someone watches: a terminal, several ranks, not --quiet.
    rank_progress = RankBars(sys.stderr) if watching else (lambda side, done, total: None)

    def waiting(out: Path) -> None:
        if not quiet:
            click.echo(f"cann-diff: waiting for another cann-diff writing to {out}", err=True)

    options = Options(base_label=labels[0], new_label=labels[1] if len(news) == 1 else None,
                      steps=steps, thresholds=thresholds, fusion_map=fusion_map,
                      alias_map=alias_map, jobs=jobs, scheduler=scheduler,
                      limits=Limits(dask_timeout_s=timeout_s))
    if out_dir is not None:  # fail early, but create nothing before the inputs read
        check_output_dir(out_dir, inputs, create=False)
    invocation = Invocation.now(_command_line(click.get_current_context()))
    # Each candidate's charts go to the chart workers as soon as it is compared.
    with _charts_beside(chart_workers) as workers:
        on_result = (lambda result: workers.offer(result.report)) if workers else \
            (lambda result: None)
        compare = diff_ladder if ladder else diff_candidates
        results = compare(base, news, options, labels, progress, rank_progress, invocation,
                          on_result)
        reports = [r.report for r in results]
        target = out_dir or Path("reports") / _default_name(reports[:-1] if ladder
                                                             else reports)
        # Cut to what OUT's filesystem takes (a 300-character label); the labels stay whole.
        names = [fit_name(name, target) for name in unique_names(
            [f"{safe_name(r.base.label)}_vs_{safe_name(r.new.label)}" for r in reports])]
        if junit_path is not None and out_dir is None:  # OUT known now; nothing written yet
            check_junit(junit_path, target, [*inputs, *filter(None, (fusion_map, alias_map))])
        out = check_output_dir(target, inputs)
        failed = [gate is not None and bool(r.comparison.step.gate) for r in results]
        summary = _ladder_summary(reports, names, gate, failed[-1]) if ladder else None
        # The junit file is part of the unit: written before any move, moved with the report.
        beside = {} if junit_path is None else \
            {junit_path: _junit_text(reports, names, out_dir or out, summary)}
        # The whole report is written into a stage and moved into place under a lock: a
        # reader never sees report.md of one run beside a chart of another.
        with staged_report(out, on_wait=lambda: waiting(out), beside=beside) as stage:
            replaced = [name for name in ("report.md", "report.json", "ranks.csv")
                        if (out / name).exists()]
            progress(f"writing report to {out}")
            if summary is not None:
                _write_ladder(results, names, summary, stage, not no_charts, not no_html,
                              workers)
            elif len(results) == 1:
                _write_report(results[0], stage, not no_charts, not no_html, workers)
            else:
                _write_candidates(results, names, failed if gate is not None else None, gate,
                                  stage, not no_charts, not no_html, workers)
    if replaced and not quiet:  # said once the moves are done: a failed run replaced nothing
        click.echo(f"cann-diff: replacing {', '.join(replaced)} in {fmt.visible(str(out))}",
                   err=True)
    if not quiet:
        _warn(reports)
    if summary is not None:
        click.echo(_ladder_screen(summary, out_dir or out))
        failed = [False] * (len(results) - 1) + failed[-1:]  # the gate: first vs last
    elif len(results) == 1:
        click.echo(_screen(reports[0], out_dir or out))
    else:
        click.echo(_candidates_summary(results, names, out_dir or out))
    slow = [r.report.new.label for r, f in zip(results, failed) if f]
    if slow:
        click.echo(f"cann-diff: gate failed: step time regressed by ≥ {gate:g}% in "
                   + ", ".join(f"{fmt.visible(r.report.new.label)} "
                               f"({fmt.pct(r.report.step.change_pct)})"
                               for r, f in zip(results, failed) if f), err=True)
        sys.exit(EXIT_REGRESSION)
    sys.exit(EXIT_OK)


def _default_name(reports) -> str:
    """OUT's default: ``<base>_vs_<new>`` or ``<base>_vs_<c1>_<c2>…``, cut to fit ``reports/``."""
    return fit_name(f"{safe_name(reports[0].base.label)}_vs_"
                    + "_".join(safe_name(r.new.label) for r in reports), Path("reports"))


def _junit_text(reports, names: list[str], shown: Path, ladder=None) -> str:
    """The JUnit XML; the report directories are written as given (``shown``).

    A ladder's is the gate's (first profile against the last), naming the rungs.
    """
    from .render.junit import junit_xml, rung_notes

    if ladder is not None:
        return junit_xml(reports[-1:], [shown / names[-1]], rung_notes(ladder, reports[:-1]))
    directories = [shown] if len(reports) == 1 else [shown / name for name in names]
    return junit_xml(reports, directories)


def _ladder_summary(reports, names: list[str], gate: float | None, failed: bool):
    from .report.ladder import build_ladder

    return build_ladder(reports[:-1], reports[-1], names[:-1], names[-1], gate,
                        failed if gate is not None else None)


def _write_ladder(results, names: list[str], summary, stage: Path, charts: bool, html: bool,
                  workers: Any = None) -> None:
    """Each rung's report and the gate's in their own directories, the summary beside."""
    from .render.ladder import write_ladder_summary

    for result, name in zip(results, names):
        (stage / name).mkdir()
        _write_report(result, stage / name, charts, html, workers)
    write_ladder_summary(summary, stage, charts, html)


def _ladder_screen(summary, out_dir: Path) -> str:
    lines = [fmt.visible(summary.verdict), ""]
    lines += [f"  {fmt.visible(rung.sentence)}" for rung in summary.rungs]
    lines += ["", f"report: {fmt.visible(str(out_dir / 'report.md'))}"]
    return "\n".join(lines)


def _labels(spec: str | None, base_label: str | None, new_label: str | None,
            candidates: int) -> list[str | None]:
    """Labels of BASE and every NEW (None: the default), from --labels or --*-label."""
    if spec is not None:
        if base_label or new_label:
            raise UsageError("--labels", "give either --labels or --base-label/--new-label")
        labels: list[str | None] = [part.strip() for part in spec.split(",")]
        if len(labels) != candidates + 1 or not all(labels):
            raise UsageError("--labels", f"needs {candidates + 1} non-empty names (BASE and "
                                         f"each NEW), got {spec!r}")
        if len(set(labels)) != len(labels):
            raise UsageError("--labels", f"names must differ, got {spec!r}")
        return labels
    if new_label and candidates > 1:
        raise UsageError("--new-label", "names one NEW; with several use --labels")
    return [base_label, *([new_label] if candidates == 1 else [None] * candidates)]


def _warn(reports) -> None:
    """Every distinct warning once on stderr (not once per rank or per candidate)."""
    said = set()
    for report in reports:
        memory = [w.text for w in report.memory.warnings] if report.memory is not None else []
        for warning in ([f"base: {w.text}" for w in report.base.warnings]
                        + [f"{report.new.label}: {w.text}" if len(reports) > 1
                           else f"new: {w.text}" for w in report.new.warnings]
                        + list(report.warnings) + memory):
            if warning not in said:
                said.add(warning)
                click.echo(f"cann-diff: warning: {fmt.visible(warning)}", err=True)


@contextmanager
def _charts_beside(workers: int) -> Iterator[Any]:
    """``ChartWorkers`` on ``workers`` processes for the block; None without any."""
    if not workers:
        yield None
        return
    from .processes import worker_pool
    from .render.chart_workers import ChartWorkers

    with worker_pool(workers, CHART_PRELOAD) as pool:
        yield ChartWorkers(pool, workers, draw_here=False)


def _write_candidates(results, names: list[str], failed: list[bool] | None,
                      gate: float | None, stage: Path, charts: bool, html: bool,
                      workers: Any = None) -> None:
    """Each pairwise report in its own directory, the summary beside them."""
    from .render.candidates import write_candidates_summary
    from .report import build_candidates_summary

    summary = build_candidates_summary([r.report for r in results], names,
                            failed or [None] * len(results), gate)
    drawn_beside = charts and workers is not None
    if drawn_beside:  # its chart is drawn while the reports are written
        workers.offer_summary(summary)
    for result, name in zip(results, names):
        (stage / name).mkdir()
        _write_report(result, stage / name, charts, html, workers)
    images = workers.summary_images(summary) if drawn_beside else None
    write_candidates_summary(summary, stage, charts, html, images=images)


def _candidates_summary(results, names: list[str], out_dir: Path) -> str:
    from .report import build_candidates_summary

    summary = build_candidates_summary([r.report for r in results], names, [None] * len(results))
    lines = [fmt.visible(summary.verdict), ""]
    for candidate in summary.candidates:
        s = candidate.step
        lines.append(f"{fmt.visible(candidate.label)}: step {fmt.ms(s.base_us)} → "
                     f"{fmt.ms(s.new_us)} ms "
                     f"({fmt.pct(s.change_pct)}, {s.status}"
                     f"{', ' + fmt.p_phrase(s.p_value) if s.p_value is not None else ''})")
        for finding in candidate.findings[:3]:
            lines.append(f"  [{finding.severity}] {finding.id}: {fmt.visible(finding.title)}")
    lines += ["", f"report: {fmt.visible(str(out_dir / 'report.md'))}"]
    return "\n".join(lines)


def run() -> None:
    """The console script (and ``python -m cann_diff``): the command, then a quick exit.

    After a report the interpreter's own teardown (every module and object freed one by
    one) took 0.3-0.55 s of the README example's 4 s. The exit handlers still run
    (multiprocessing's clean-up, logging) and the streams are flushed; only the teardown
    is skipped. Where something could still need it — a thread left running, a stream
    that will not flush (a closed pipe) — the exit is the usual one. ``main`` itself, as
    tests and library callers invoke it, exits as usual.
    """
    try:
        main(prog_name="cann-diff")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            _exit_now(exc.code or 0)
        raise


def _exit_now(code: int) -> None:
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and not t.daemon]
    if others:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)
