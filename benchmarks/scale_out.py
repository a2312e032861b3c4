"""The measured parts of a scale-out projection: one big rank's read, its bytes, the rest.

    python benchmarks/generate.py --rows 1e6 --ranks 1 --out benchmarks/.data/1M
    python benchmarks/scale_out.py --pair benchmarks/.data/1M --ranks 1000

For each side's one rank, as a Dask worker reads it (``read_and_reduce_many``, summaries
only, the durations a rank of ``--ranks`` may keep), medians of ``--repeat``:

* **read_reduce_s** — the rank's read and reduce, in this process (pyarrow parses on
  all cores), and **read_reduce_cpu_s**, its CPU time (user + sys);
* **shipped_bytes** — ``pickle.dumps`` of what goes back to the client (distributed
  pickles a task's result the same way) and **pickle_s**, its pickling;
* **merge_s** — the serial rest of reading a side of ``--ranks`` such ranks in the client:
  that result given ``--ranks`` times, as ranks 0 … N-1, through ``load_run``'s rank ids,
  combine and step breakdown (the read itself replaced);
* **compare_s** and **write_s** — ``compare_runs`` on two such sides, then ``write_report``
  (Markdown, JSON, HTML and the charts) into a scratch directory.

Printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import cann_diff.read as read  # noqa: E402
from cann_diff.pipeline import Options, compare_runs, flag_implausible  # noqa: E402
from cann_diff.read.formats import find_rank_sources  # noqa: E402
from cann_diff.read.maps import load_vocabulary  # noqa: E402
from cann_diff.read.reduce.ranks import RankPlan  # noqa: E402
from cann_diff.read.reduce.summary import samples_per_rank  # noqa: E402
from cann_diff.render import write_report  # noqa: E402
from cann_diff.settings import DEFAULT_LIMITS  # noqa: E402


def timed(func, repeat: int, cpu: list[float] | None = None):
    """The last result of ``func()`` and the median of its wall times (CPU ones in ``cpu``)."""
    times, cpus, result = [], [], None
    for _ in range(repeat):
        began, began_cpu = time.perf_counter(), os.times()
        result = func()
        times.append(time.perf_counter() - began)
        ended_cpu = os.times()
        cpus.append(ended_cpu.user + ended_cpu.system - began_cpu.user - began_cpu.system)
    if cpu is not None:
        cpu.append(statistics.median(cpus))
    return result, statistics.median(times)


def one_rank(side: Path, ranks: int, repeat: int) -> tuple[object, dict]:
    """The side's rank read as a worker of a ``ranks``-rank cluster reads it, and its costs."""
    _, sources = find_rank_sources(side)
    plan = RankPlan(load_vocabulary(None, None), samples_per_rank(
        ranks, DEFAULT_LIMITS.sample_budget), keep_rows=False)
    cpu: list[float] = []
    results, read_s = timed(lambda: read.read_and_reduce_many(plan, sources[:1]), repeat, cpu)
    shipped, pickle_s = timed(lambda: pickle.dumps(results, protocol=5), repeat)
    return results[0], {"read_reduce_s": round(read_s, 3), "read_reduce_cpu_s": round(cpu[0], 3),
                        "shipped_bytes": len(shipped), "pickle_s": round(pickle_s, 3)}


def side_of(path: Path, result, ranks: int):
    """``load_run(path)`` with its read replaced by ``ranks`` copies of ``result``."""
    copies = [replace(result, rank=n, source=result.source.with_name(f"rank{n:05d}"))
              for n in range(ranks)]
    real = read.start_all
    read.start_all = lambda *args, **kwargs: lambda progress: copies
    try:
        return flag_implausible(read.load_run(path, keep_rows=False))
    finally:
        read.start_all = real


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", type=Path, default=ROOT / "benchmarks/.data/1M",
                        help="a generate.py pair of one rank per side")
    parser.add_argument("--ranks", type=int, default=1000, help="ranks per side projected")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    out: dict = {"ranks": args.ranks}
    sides = {}
    for name in ("base", "new"):
        result, costs = one_rank(args.pair / name, args.ranks, args.repeat)
        out[name] = costs
        sides[name], out[name]["merge_s"] = timed(
            lambda: side_of(args.pair / name, result, args.ranks), 1)
        out[name]["merge_s"] = round(out[name]["merge_s"], 3)
    compared, out["compare_s"] = timed(lambda: compare_runs(sides["base"], sides["new"],
                                                            Options()), 1)
    with tempfile.TemporaryDirectory() as scratch:
        _, out["write_s"] = timed(lambda: write_report(compared.report, Path(scratch)), 1)
    out["compare_s"], out["write_s"] = round(out["compare_s"], 3), round(out["write_s"], 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
