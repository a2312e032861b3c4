"""Benchmark cann-diff against the raw-read limit of its input.

    python benchmarks/run.py --sizes 0.1,1          # rows per side, in millions

For each size a base/new pair is generated once with benchmarks/generate.py and cached
in ``benchmarks/.data/<rows>_r<ranks>/`` (delete that folder to regenerate; it is scratch
data and is not tracked). Then, each repeated ``--repeat`` times (median reported):

* **e2e** — ``cann-diff BASE NEW -o OUT --quiet --no-charts`` run as a subprocess
  (``python -m cann_diff``, the package imported from ``--src``, default this checkout):
  wall time, CPU time and peak RSS of its whole process tree: this script is a child
  subreaper, so the forkserver and the worker processes that read sides and ranks are
  reaped here and counted (CPU summed, RSS the largest process);
* **floor** — reading only the columns cann-diff needs from every kernel_details.csv of
  both sides with ``pyarrow.csv.read_csv(include_columns=...)`` (Name, Type, Accelerator
  Core, Start Time(us), Duration(us), Step Id, Input Shapes, Input Data Types, plus
  Device_id when present), plus every step_trace_time.csv and ``json.loads`` of every
  communication.json, in a subprocess too, timed inside it (no interpreter start); the
  CSV-only part is kept as ``floor_csv_s``;
* **startup** — cann-diff on the shipped 2-rank example pair (fixed cost: interpreter,
  imports, report writing);
* **bound** — the least wall time of a reader that imports pandas, then parses the kernel
  tables as the floor does: a fresh interpreter's ``import pandas, pyarrow.csv`` (timed
  as a subprocess) plus the floor's CSV CPU seconds spread over every core. The time
  between the bound and the performance issue's target (``TARGETS``) is what such a run
  has for everything else: the start of its workers, communication.json, the reduce, the
  comparison and the report. The second table sets it beside what cann-diff spends there.
  (A reader could start the parse while pandas is still importing, or parse with less
  CPU than ``read_csv``'s defaults: the bound is of this design, not of every reader.)
* optionally **msprof-analyze compare --enable_kernel_compare** (its per type+shape kernel
  comparison, the closest analogue) on the same pair, when the ``msprof-analyze`` command
  is on PATH or given with ``--msprof-analyze`` (it needs a trace_view.json to start, so it
  runs on a hard-linked view of the pair with an empty one, see ``msprof_view``).

Before anything is timed the package at ``--src`` is compiled to bytecode (``compileall``,
into its ``__pycache__`` folders): a user's warm run imports it from that cache, which
Python writes at the first run (``pip install .`` at install). Where the environment sets
``PYTHONDONTWRITEBYTECODE=1`` (this machine does) every process would otherwise compile
the package's modules again, 0.1-0.2 s each (docs/performance.md, Turn 13).

The floor and e2e runs alternate, each e2e run right after a floor run, and e2e / floor is
the median of those paired ratios: the machine's speed drifts, and a ratio of medians
taken minutes apart can be off by more than the change being measured. Each timed floor
run follows an untimed one (right after an e2e run a floor run took 2-4x as long).

Printed as a Markdown table (and saved as JSON with ``--json FILE``): e2e / floor,
peak RSS / input bytes (all files cann-diff reads, both sides) and seconds per million
rows per side (linearity).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / ".data"
EXAMPLE = (ROOT / "examples" / "cann7.0.1.3", ROOT / "examples" / "cann8.0.RC2")
FLOOR_COLUMNS = ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
                 "Step Id", "Input Shapes", "Input Data Types"]

# argv[1]: the columns wanted; argv[2]: a JSON file listing the paths (10,000 ranks give
# 60,000 paths: 5.5 MB, over the 2 MB a command line may hold).
FLOOR_SCRIPT = r"""
import csv, json, os, sys, time
import pyarrow.csv as pacsv
wanted = json.loads(sys.argv[1])
with open(sys.argv[2]) as listing:
    paths = json.load(listing)
began, cpu = time.perf_counter(), os.times()
rows = 0
for path in paths:
    if not path.endswith("kernel_details.csv"):
        continue
    with open(path, newline="") as handle:
        header = [h.strip() for h in next(csv.reader(handle))]
    cols = [c for c in wanted + ["Device_id"] if c in header]
    table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(include_columns=cols))
    rows += table.num_rows
csv_done, csv_cpu = time.perf_counter(), os.times()
for path in paths:
    if path.endswith("step_trace_time.csv"):
        pacsv.read_csv(path)
    elif path.endswith("communication.json"):
        with open(path, "rb") as handle:
            json.loads(handle.read())
done = os.times()
print(json.dumps({"seconds": time.perf_counter() - began, "rows": rows,
                  "cpu": done.user - cpu.user + done.system - cpu.system,
                  "csv_seconds": csv_done - began,
                  "csv_cpu": csv_cpu.user - cpu.user + csv_cpu.system - cpu.system}))
"""


def become_subreaper() -> None:
    """Adopt orphaned descendants (Linux), so that their CPU and RSS can be counted."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # elsewhere only the direct child is counted


def run_child(cmd: list[str], cwd: Path | None = None, cpu: list | None = None,
              env: dict | None = None) -> tuple[float, int, str]:
    """Run ``cmd``; return (wall seconds, peak RSS bytes of that child, stdout).

    The child's CPU seconds (user + system) are appended to ``cpu`` when given.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds, peak = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        while True:  # the forkserver and its workers, orphaned when the child ended
            try:
                _, _, orphan = os.wait4(-1, 0)
            except ChildProcessError:
                break
            seconds += orphan.ru_utime + orphan.ru_stime
            peak = max(peak, orphan.ru_maxrss)
        if cpu is not None:
            cpu.append(seconds)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{stderr[-2000:]}")
    return wall, peak * 1024, stdout


def ensure_pair(rows: int, ranks: int, data_dir: Path, comm_fraction: float | None = None
                ) -> Path:
    """Generate (once) and return the cached pair directory for ``rows`` per side."""
    pair = data_dir / (f"{rows}_r{ranks}" + (f"_comm{comm_fraction:g}" if comm_fraction else ""))
    stamp = pair / "generated.json"
    if stamp.is_file():
        return pair
    if pair.exists():
        shutil.rmtree(pair)
    began = time.perf_counter()
    # In a child: a child's peak RSS starts from its parent's at fork, so this process
    # stays small for the measurements that follow.
    subprocess.run([sys.executable, str(HERE / "generate.py"), "--rows", str(rows),
                    "--ranks", str(ranks), "--out", str(pair),
                    *(["--comm-fraction", str(comm_fraction)] if comm_fraction else [])],
                   check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - began
    stamp.write_text(json.dumps({"rows": rows, "ranks": ranks, "seconds": seconds}))
    print(f"  generated {pair} in {seconds:.1f} s", file=sys.stderr)
    return pair


def revision(src: Path) -> str:
    """``<short sha>[+uncommitted]`` of the cann_diff at ``src`` when it is a git checkout."""
    try:
        sha = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--",
                                "cann_diff"], capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return str(src)
    if Path(subprocess.run(["git", "-C", str(src), "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True).stdout.strip()) != src:
        return str(src)  # not the top of a checkout (e.g. an exported tree inside one)
    return sha + ("+uncommitted" if dirty else "")


def kernel_files(pair: Path) -> list[Path]:
    return sorted(pair.glob("*/*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))


def floor_files(pair: Path) -> list[Path]:
    """What the floor reads: kernel_details.csv, step_trace_time.csv, communication.json."""
    return sorted(p for name in ("kernel_details.csv", "step_trace_time.csv",
                                 "communication.json")
                  for p in pair.glob(f"*/*_ascend_pt/ASCEND_PROFILER_OUTPUT/{name}"))


def input_bytes(pair: Path) -> tuple[int, int]:
    """(bytes of all files cann-diff reads, bytes of the kernel_details.csv files)."""
    every = sum(p.stat().st_size for side in ("base", "new")
                for p in (pair / side).rglob("*") if p.is_file())
    return every, sum(p.stat().st_size for p in kernel_files(pair))


# What the bound's reader imports before it parses a row: pandas, and the CSV reader.
READER_IMPORTS = "import pandas, pyarrow.csv"


def cores() -> int:
    """The cores this process may run on (the floor's threads and cann-diff's workers)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def reading_bound_s(imports_s: float, csv_cpu_s: float, n_cores: int) -> float:
    """The least wall time of a reader that imports pandas, then parses as the floor does."""
    return imports_s + csv_cpu_s / n_cores


# The performance issue's e2e / floor targets, by (rows per side, ranks per side); the
# 1,000-rank pair is `--sizes 0.164 --spread-ranks 1000`.
TARGETS = {(250_000, 1): 2.5, (1_000_000, 1): 1.5, (4_000_000, 1): 1.5,
           (4_000_000, 4): 1.2, (164_000, 1000): 2.0}


def cann_diff_cmd(base: Path, new: Path, out: Path, jobs: int | None = None) -> list[str]:
    return [sys.executable, "-m", "cann_diff", str(base), str(new), "-o", str(out),
            "--quiet", "--no-charts", *(["--jobs", str(jobs)] if jobs else [])]


def run_cann_diff(base: Path, new: Path, out: Path, args: argparse.Namespace,
                  cpu: list | None = None) -> tuple[float, int, str]:
    """cann-diff as a subprocess, importing the package from ``--src`` (default: this repo)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(args.src), os.environ.get("PYTHONPATH", "")) if p))
    return run_child(cann_diff_cmd(base, new, out, args.jobs), cwd=args.src, cpu=cpu, env=env)


def measure(rows: int, args: argparse.Namespace, startup: tuple[float, int],
            imports_s: float, ranks: int | None = None,
            comm_fraction: float | None = None) -> dict:
    ranks = args.ranks if ranks is None else ranks
    pair = ensure_pair(rows, ranks, args.data_dir, comm_fraction)
    total_bytes, csv_bytes = input_bytes(pair)
    listing = Path(args.data_dir) / f"floor-files-{pair.name}.json"
    listing.write_text(json.dumps([str(p) for p in floor_files(pair)]))
    floor_cmd = [sys.executable, "-c", FLOOR_SCRIPT, json.dumps(FLOOR_COLUMNS), str(listing)]
    # Each e2e run right after its floor run: the machine's speed drifts (1.7x within an
    # hour here), and a ratio is only fair between runs made side by side. Each timed run
    # also follows a run that has just freed as much memory: memory freed seconds ago is
    # slow to take again here (a floor run right after an e2e run took 2-4x as long as
    # one right after another floor run, with its files in the page cache either way).
    floors, e2e, e2e_cpu = [], [], []
    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        for i in range(args.repeat):
            run_child(floor_cmd)  # untimed: it also warms the page cache
            _, rss, stdout = run_child(floor_cmd)
            floors.append(json.loads(stdout) | {"rss": rss})
            out = Path(tmp) / f"report{i}"
            wall, rss, _ = run_cann_diff(pair / "base", pair / "new", out, args, e2e_cpu)
            e2e.append((wall, rss))
            print(f"    e2e run {i + 1}: {wall:.2f} s, {rss / 2**20:.0f} MiB "
                  f"(floor beside it {floors[-1]['seconds']:.2f} s)", file=sys.stderr)
    ratios = [wall / floor["seconds"] for (wall, _), floor in zip(e2e, floors)]
    n_cores = cores()
    cpu_ratios = [cpu / floor["cpu"] for cpu, floor in zip(e2e_cpu, floors) if floor["cpu"]]
    result = {
        "rows_per_side": rows, "ranks": ranks, "comm_fraction": comm_fraction,
        "input_bytes": total_bytes, "kernel_csv_bytes": csv_bytes,
        "floor_s": statistics.median(f["seconds"] for f in floors),
        "floor_all_s": [round(f["seconds"], 3) for f in floors],
        "floor_csv_s": statistics.median(f["csv_seconds"] for f in floors),
        "floor_rss": statistics.median(f["rss"] for f in floors),
        "floor_cpu_s": statistics.median(f["cpu"] for f in floors),
        "floor_csv_cpu_s": statistics.median(f["csv_cpu"] for f in floors),
        "e2e_cpu_s": statistics.median(e2e_cpu),
        "e2e_s": statistics.median(e[0] for e in e2e),
        "e2e_all_s": [round(e[0], 3) for e in e2e],
        "ratio_paired": statistics.median(ratios),
        "ratio_all": [round(r, 3) for r in ratios],
        "cpu_ratio_paired": statistics.median(cpu_ratios) if cpu_ratios else None,
        "peak_rss": statistics.median(e[1] for e in e2e),
        "startup_s": startup[0], "startup_rss": startup[1], "src": args.revision,
        "imports_s": imports_s, "cores": n_cores,
        "bound_s": statistics.median(reading_bound_s(imports_s, f["csv_cpu"], n_cores)
                                     for f in floors),
    }
    msprof = args.msprof_analyze or shutil.which("msprof-analyze")
    if msprof and rows > args.msprof_max_rows:
        print(f"  msprof-analyze skipped above {args.msprof_max_rows:,} rows per side "
              "(--msprof-max-rows; it needs about 4.4 GB RSS per million rows)", file=sys.stderr)
    elif msprof:
        measured = measure_msprof(msprof, pair, args)
        if measured:
            result["msprof_s"], result["msprof_rss"] = measured
    return result


def msprof_view(pair: Path) -> list[tuple[Path, Path]]:
    """Hard-linked copy of the pair that msprof-analyze accepts; (base, new) rank dirs.

    ``msprof-analyze compare`` refuses a directory without ASCEND_PROFILER_OUTPUT/
    trace_view.json; its kernel comparison (``--enable_kernel_compare``) reads only
    kernel_details.csv, so an empty ``[]`` trace is enough. The view lives beside
    base/ and new/ so that cann-diff's inputs stay untouched.
    """
    view = pair / "msprof_view"
    ranks = []
    for side in ("base", "new"):
        dirs = []
        for src in sorted((pair / side).glob("*_ascend_pt")):
            dst = view / side / src.name
            if not dst.exists():
                (dst / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
                for file in src.rglob("*"):
                    if file.is_file():
                        os.link(file, dst / file.relative_to(src))
                (dst / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text("[]\n")
            dirs.append(dst)
        ranks.append(dirs)
    return list(zip(*ranks))


def measure_msprof(msprof: str, pair: Path, args: argparse.Namespace) -> tuple[float, int] | None:
    """msprof-analyze kernel compare, one call per rank (it compares one rank per call).

    Returns (median total seconds, max peak RSS bytes), or None when it fails.
    """
    times, peak = [], 0
    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        for i in range(args.repeat):
            total = 0.0
            for r, (base, new) in enumerate(msprof_view(pair)):
                out = Path(tmp) / f"msprof{i}_{r}"
                out.mkdir()
                cmd = [msprof, "compare", "-d", str(new), "-bp", str(base), "-o", str(out),
                       "--enable_kernel_compare", "--force"]
                try:
                    wall, rss, _ = run_child(cmd)
                except RuntimeError as exc:
                    print(f"  msprof-analyze failed: {exc}", file=sys.stderr)
                    return None
                if not list(out.glob("*.xlsx")):
                    print("  msprof-analyze wrote no result; not timed", file=sys.stderr)
                    return None
                total += wall
                peak = max(peak, rss)
            times.append(total)
            print(f"    msprof-analyze run {i + 1}: {total:.2f} s, {peak / 2**20:.0f} MiB",
                  file=sys.stderr)
    return statistics.median(times), peak


def pair_label(result: dict) -> str:
    """A pair's name in the tables: its rows per side, its ranks and its collectives."""
    ranks = result.get("ranks", 1)
    return f"{result['rows_per_side']:,}" + (f" over {ranks:,} ranks" if ranks != 1 else "") + (
        f", {result['comm_fraction']:g} collectives" if result.get("comm_fraction") else "")


def table(results: list[dict]) -> str:
    """Markdown table; MB = 10^6 bytes."""
    has_msprof = any("msprof_s" in r for r in results)
    head = ["rows/side", "input MB", "floor s", "e2e s", "e2e/floor", "(e2e−startup)/floor",
            "CPU e2e/floor",
            "peak RSS MB", "RSS/input", "(RSS−startup RSS)/input", "e2e s per M rows",
            "marginal s per M rows"]
    if has_msprof:
        head += ["msprof-analyze s", "msprof-analyze RSS MB"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    previous = None
    for r in results:
        m = r["rows_per_side"] / 1e6
        extra = r.get("ranks", 1) != 1 or r.get("comm_fraction")
        marginal = "—" if previous is None or extra else \
            f"{(r['e2e_s'] - previous['e2e_s']) / (m - previous['rows_per_side'] / 1e6):.2f}"
        cells = [pair_label(r), f"{r['input_bytes'] / 1e6:,.0f}",
                 f"{r['floor_s']:.3f}", f"{r['e2e_s']:.2f}",
                 f"{r.get('ratio_paired', r['e2e_s'] / r['floor_s']):.1f}×",
                 f"{max(0.0, r['e2e_s'] - r['startup_s']) / r['floor_s']:.1f}×",
                 f"{r.get('cpu_ratio_paired') or r['e2e_cpu_s'] / r['floor_cpu_s']:.1f}×",
                 f"{r['peak_rss'] / 1e6:,.0f}", f"{r['peak_rss'] / r['input_bytes']:.2f}×",
                 f"{max(0, r['peak_rss'] - r['startup_rss']) / r['input_bytes']:.2f}×",
                 f"{r['e2e_s'] / m:.2f}", marginal]
        if has_msprof:
            cells += [f"{r['msprof_s']:.2f}" if r.get("msprof_s") else "—",
                      f"{r['msprof_rss'] / 1e6:,.0f}" if r.get("msprof_rss") else "—"]
        lines.append("| " + " | ".join(cells) + " |")
        previous = previous if extra else r
    lines += rank_cost(results)
    startup = results[0]
    lines.append(f"\ncann_diff: {startup['src']}; startup (cann-diff on the shipped example pair): "
                 f"{startup['startup_s']:.2f} s, "
                 f"{startup['startup_rss'] / 1e6:,.0f} MB peak RSS; floor = pyarrow.csv read of "
                 "the needed kernel_details.csv columns plus step_trace_time.csv plus json.loads "
                 "of communication.json, both sides; CPU = user + system seconds of the whole "
                 "process tree (the floor's measured inside its process, around the reads); "
                 "peak RSS = the largest process; medians of "
                 f"{len(results[0]['e2e_all_s'])} runs; e2e/floor and CPU e2e/floor are "
                 "medians of the ratios of each e2e run to the floor run made just before it.")
    return "\n".join(lines)


def against_targets(results: list[dict]) -> str:
    """Each pair against the issue's target, and the time the reading bound leaves."""
    head = ["pair", "floor s", "target", "e2e/floor", "met", "bound s", "bound/floor",
            "left at the target, s", "cann-diff beyond the bound, s"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for r in results:
        target = None if r.get("comm_fraction") else \
            TARGETS.get((r["rows_per_side"], r.get("ranks", 1)))
        lines.append("| " + " | ".join([
            pair_label(r), f"{r['floor_s']:.2f}", f"≤ {target:g}×" if target else "—",
            f"{r['ratio_paired']:.2f}×",
            ("yes" if r["ratio_paired"] <= target else "no") if target else "—",
            f"{r['bound_s']:.2f}", f"{r['bound_s'] / r['floor_s']:.2f}×",
            f"{target * r['floor_s'] - r['bound_s']:.2f}" if target else "—",
            f"{r['e2e_s'] - r['bound_s']:.2f}"]) + " |")
    first = results[0]
    lines.append(f"\nbound = `python -c '{READER_IMPORTS}'` ({first['imports_s']:.2f} s, "
                 f"median) + the floor's CSV CPU / {first['cores']} cores: a reader that "
                 "imports pandas, then parses as the floor does. \"left at the target\" is "
                 "target × floor − bound: what a run meeting the target has for everything but "
                 "parsing the kernel tables. e2e/floor (and \"met\") is the median of the "
                 "paired ratios; the seconds are medians of the runs, so near the line the two "
                 "can disagree.")
    return "\n".join(lines)


def rank_cost(results: list[dict]) -> list[str]:
    """What a rank costs, from a pair spread over many ranks and the same size in one."""
    lines = []
    for spread in (r for r in results if r.get("ranks", 1) > 1):
        one = next((r for r in results if r.get("ranks", 1) == 1 and not r.get("comm_fraction")
                    and r["rows_per_side"] == spread["rows_per_side"]), None)
        if one is None:
            continue
        directories = 2 * (spread["ranks"] - 1)  # both sides
        per_rank = (spread["e2e_cpu_s"] - one["e2e_cpu_s"]) / directories
        lines.append(f"\n{spread['rows_per_side']:,} rows per side over {spread['ranks']:,} ranks "
                     f"against one rank: {spread['e2e_s'] / one['e2e_s']:.1f}× the wall time "
                     f"(target ≤ 1.5×); a rank's cost (CPU, the difference over the "
                     f"{directories:,} more rank directories) {per_rank * 1000:.1f} ms "
                     "(target ≤ 10 ms).")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0.1,1,4",
                        help="rows per side in millions, comma-separated (default 0.1,1,4)")
    parser.add_argument("--ranks", type=int, default=1, help="ranks per side (default 1)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--data-dir", type=Path, default=DATA,
                        help="cache of generated pairs (default benchmarks/.data)")
    parser.add_argument("--src", type=Path, default=ROOT,
                        help="directory holding the cann_diff package to benchmark, e.g. an "
                             "exported older revision (default: this checkout)")
    parser.add_argument("--msprof-analyze", default=None,
                        help="msprof-analyze executable (default: from PATH when installed)")
    parser.add_argument("--msprof-max-rows", type=float, default=1e6,
                        help="largest size (rows per side) given to msprof-analyze (default 1e6)")
    parser.add_argument("--spread-ranks", type=int, default=0,
                        help="also the smallest size spread over this many rank directories "
                             "per side (e.g. 1000), to compare with one rank")
    parser.add_argument("--comm-fraction", type=float, default=0.0,
                        help="also a communication-heavy pair at the smallest size: this share "
                             "of rows are collectives (e.g. 0.3; the default pairs have 0.02)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="cann-diff's --jobs for the e2e runs (default: cann-diff's own)")
    parser.add_argument("--json", type=Path, default=None, help="also write results as JSON")
    args = parser.parse_args(argv)
    become_subreaper()
    sizes = [int(round(float(s) * 1e6)) for s in args.sizes.split(",") if s.strip()]
    args.data_dir.mkdir(parents=True, exist_ok=True)
    args.src = args.src.resolve()
    args.revision = revision(args.src)
    if not (args.src / "cann_diff" / "__init__.py").is_file():
        parser.error(f"--src {args.src}: no cann_diff package there")
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.src / "cann_diff")],
                   check=True)  # as a user's warm run finds it: bytecode cached

    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        runs = [run_cann_diff(*EXAMPLE, Path(tmp) / f"s{i}", args)
                for i in range(args.repeat)]  # also warms the interpreter's file cache
    startup = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
    print(f"startup (example pair): {startup[0]:.2f} s, {startup[1] / 2**20:.0f} MiB",
          file=sys.stderr)
    helps = [run_child([sys.executable, "-m", "cann_diff", "--help"], cwd=args.src)[0]
             for _ in range(args.repeat)]
    print(f"startup (--help): {statistics.median(helps):.2f} s", file=sys.stderr)
    imports_s = statistics.median(run_child([sys.executable, "-c", READER_IMPORTS])[0]
                                  for _ in range(args.repeat))
    print(f"imports ({READER_IMPORTS}): {imports_s:.2f} s", file=sys.stderr)
    results = []
    for rows in sorted(sizes):
        print(f"{rows:,} rows per side", file=sys.stderr)
        results.append(measure(rows, args, startup, imports_s))
    if args.spread_ranks:
        print(f"{min(sizes):,} rows per side over {args.spread_ranks} ranks", file=sys.stderr)
        results.append(measure(min(sizes), args, startup, imports_s, ranks=args.spread_ranks))
    if args.comm_fraction:
        print(f"{min(sizes):,} rows per side, {args.comm_fraction:g} collectives",
              file=sys.stderr)
        results.append(measure(min(sizes), args, startup, imports_s,
                               comm_fraction=args.comm_fraction))
    print(f"--help: {statistics.median(helps):.2f} s")
    print(table(results))
    print()
    print(against_targets(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
