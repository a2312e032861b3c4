"""cann-diff command line: parse, check, call the library, write. Nothing else.

Exit codes: 0 report written and no gate failed; 1 ``--fail-on-regression`` gate
failed (the step regressed significantly by at least PCT); 2 bad input or usage.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from pathlib import Path

import click

from . import format as fmt
from .errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION, CannDiffError
from .pipeline import Options, diff
from .render.files import check_output_dir, safe_name
from .report import Invocation
from .settings import Settings


def _percent(value: str) -> float:
    text = value.strip().rstrip("%")
    try:
        number = float(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a percentage (e.g. 5 or 5%)") from None
    if number < 0:
        raise click.BadParameter("must not be negative")
    return number


def parse_steps(spec: str) -> list[tuple[int | None, int | None]]:
    """``"5-7,9"`` → [(5, 7), (9, 9)]; ``"3-"`` = step 3 onward; ``"-4"`` = up to 4."""
    ranges = []
    for part in spec.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d*)\s*-\s*(\d*)", part)
        if part.isdigit():
            ranges.append((int(part), int(part)))
        elif match and (match.group(1) or match.group(2)):
            low, high = (int(g) if g else None for g in match.groups())
            ranges.append((low, high))
        else:
            raise click.BadParameter(f"{part!r}: use step numbers and ranges, e.g. 5-7,9 or 3-")
    return ranges


def _summary(report, out_dir: Path) -> str:
    s = report.step
    lines = [report.headline, "",
             f"step  {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms  "
             f"({fmt.pct(s.delta_pct)}, {s.status}"
             f"{', ' + fmt.p_phrase(s.p_value) if s.p_value is not None else ''})"]
    for finding in report.findings[:5]:
        lines.append(f"  [{finding.severity}] {finding.id}: {finding.title}")
    lines += ["", f"report: {out_dir / 'report.md'}"]
    return "\n".join(lines)


def _write_report(result, out_dir: Path, charts_wanted: bool, html_wanted: bool = True) -> None:
    from .render import write_report

    write_report(result.report, out_dir, charts_wanted, html=html_wanted)


def _command_line(ctx: click.Context) -> str:
    """The command as given: the arguments and every option not left at its default."""
    words = ["cann-diff"]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        source = ctx.get_parameter_source(param.name)
        if source in (None, click.core.ParameterSource.DEFAULT) or value is None \
                or value is False:
            continue
        if isinstance(param, click.Option):
            words.append(max(param.opts, key=len))
        if not getattr(param, "is_flag", False):
            words.append(str(value))
    return shlex.join(words)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path),
              help="Output directory [default: reports/<base-label>_vs_<new-label>/].")
@click.option("--base-label", help="Name of the base run in the report [default: dir name].")
@click.option("--new-label", help="Name of the new run in the report [default: dir name].")
@click.option("--top", "top_n", type=click.IntRange(1), default=15, show_default=True,
              help="Rows in the top regressions/improvements tables.")
@click.option("--steps", "steps_spec", help="Steps to compare, e.g. 5-7,9 or 3- (skip warm-up).")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Significance level.")
@click.option("--threshold", "threshold", default="5%", show_default=True,
              help="Smallest change reported as a regression/improvement.")
@click.option("--fail-on-regression", "fail_pct", metavar="PCT",
              help="Exit 1 when the step time regressed significantly by at least PCT.")
@click.option("--fusion-map", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON file adding MC2 fused ops to the built-in table.")
@click.option("--alias-map", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON file of operator family aliases {\"Gemm\": \"MatMul\"}.")
@click.option("-j", "--jobs", type=click.IntRange(1), default=os.cpu_count() or 1,
              show_default="number of cores", help="Ranks read in parallel.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Read ranks on this Dask scheduler (pip install 'cann-diff[dask]').")
@click.option("--no-charts", is_flag=True, help="Skip the PNG charts.")
@click.option("--no-html", is_flag=True, help="Skip report.html (one self-contained file).")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress or warnings on stderr (progress shows only on a terminal).")
@click.version_option(package_name="cann-diff")
def main(base, new, out_dir, base_label, new_label, top_n, steps_spec, alpha, threshold,
         fail_pct, fusion_map, alias_map, jobs, scheduler, no_charts, no_html, quiet):
    """Compare two Ascend NPU profiles: BASE (current stack) and NEW (candidate).

    Writes a Markdown + PNG + JSON report of what changed and why. BASE and NEW are
    each a profile as the profiler wrote it: a *_ascend_pt or *_ascend_ms directory
    (text or db export), a directory of them (one per rank), an ASCEND_PROFILER_OUTPUT
    directory, an msprof PROF_* directory, a trace_view.json or GPU Kineto trace
    (.json/.json.gz), or an msprof-analyze cluster_analysis_output.

    \b
    Exit codes:
      0  report written, no gate failed
      1  --fail-on-regression PCT given and the step regressed significantly by >= PCT
      2  bad input or usage (one line on stderr naming the file and the problem)
    """  # noqa: D301 (click's \b: a paragraph it must not rewrap)
    started = time.monotonic()

    watching = not quiet and sys.stderr.isatty()

    def progress(message: str) -> None:
        if watching:  # progress is for a person at a terminal, not for CI logs
            click.echo(f"[{time.monotonic() - started:5.1f}s] {message}", err=True)

    bars = {}

    def rank_progress(side: str, done: int, total: int) -> None:
        # A bar only where someone watches: a terminal, several ranks, not --quiet.
        if not watching or total < 2:
            return
        if side not in bars:
            bars[side] = click.progressbar(length=total, label=f"reading {side} ranks",
                                           file=sys.stderr)
            bars[side].__enter__()
        bars[side].update(1)
        if done == total:
            bars[side].__exit__(None, None, None)

    try:
        options = Options(base_label=base_label, new_label=new_label,
                          steps=parse_steps(steps_spec) if steps_spec else None,
                          settings=Settings(alpha=alpha, threshold_pct=_percent(threshold)),
                          top_n=top_n, fusion_map=fusion_map, alias_map=alias_map, jobs=jobs,
                          scheduler=scheduler)
        gate = _percent(fail_pct) if fail_pct is not None else None
        if out_dir is not None:  # fail early, but create nothing before the inputs read
            check_output_dir(out_dir, [base, new], create=False)
        invocation = Invocation.now(_command_line(click.get_current_context()))
        result = diff(base, new, options, progress, rank_progress, invocation)
        labels = f"{safe_name(result.report.base.label)}_vs_" \
                 f"{safe_name(result.report.new.label)}"
        out = check_output_dir(out_dir or Path("reports") / labels, [base, new])
        replaced = [name for name in ("report.md", "report.json", "ranks.csv")
                    if (out / name).exists()]
        if replaced and not quiet:
            click.echo(f"cann-diff: replacing {', '.join(replaced)} in {out}", err=True)
        progress(f"writing report to {out}")
        _write_report(result, out, not no_charts, not no_html)
    except CannDiffError as exc:
        click.echo(f"cann-diff: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except click.BadParameter as exc:
        click.echo(f"cann-diff: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - a bug must not read as exit 1 (regression)
        click.echo(f"cann-diff: internal error: {type(exc).__name__}: {exc} "
                   "(please report it with the inputs' layout)", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if not quiet:
        report = result.report
        memory = list(report.memory.warnings) if report.memory is not None else []
        said = set()
        for warning in ([f"base: {w}" for w in report.base.warnings]
                        + [f"new: {w}" for w in report.new.warnings]
                        + list(report.warnings) + memory):
            if warning not in said:  # one line per distinct warning, not one per rank
                said.add(warning)
                click.echo(f"cann-diff: warning: {warning}", err=True)
    click.echo(_summary(result.report, out_dir or out))
    step = result.comparison.step
    if gate is not None and step.significant is not False and step.delta_pct >= gate:
        click.echo(f"cann-diff: gate failed: step time {fmt.pct(step.delta_pct)} "
                   f"≥ {gate:g}%", err=True)
        sys.exit(EXIT_REGRESSION)
    sys.exit(EXIT_OK)
