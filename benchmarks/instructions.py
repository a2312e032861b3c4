"""Instructions a rank costs to read, counted by valgrind: a figure the load cannot move.

    python benchmarks/instructions.py benchmarks/.data/250000_r1000/base --ranks 100
    python benchmarks/instructions.py SIDE --src /tmp/old --vs-src .   # two revisions

On a shared 2-core VM the time of reading 500 small ranks moved by ±15 % from run to
run, more than most per-rank changes are worth. Valgrind's callgrind counts the
instructions a process runs, the same from run to run. For each revision (``--src``, and
``--vs-src`` when given) it counts a process that reads the first ``--ranks`` rank
directories of SIDE once, and one that reads them twice (``load_run`` in this process,
``jobs=1``): the difference is a warm read, without interpreter start, imports and first
calls. Printed: instructions per rank and, for two revisions, their ratio.

Instructions are not time: system calls and waits (Arrow's thread pool, page faults) are
not counted. A change that removes such work saves more time than its count says.
Needs ``valgrind`` on PATH; about a minute per 100 ranks per count.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READER = r"""
import sys
from cann_diff.read import load_run
for _ in range(int(sys.argv[2])):
    load_run(sys.argv[1], jobs=1)
"""
COLLECTED = re.compile(r"Collected : (\d+)")


def count(side: Path, reads: int, src: Path) -> int:
    """Instructions of a process that imports cann_diff from ``src`` and reads ``side``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch}/out",
             sys.executable, "-P", "-c", READER, str(side), str(reads)],
            env=env, capture_output=True, text=True, check=True)
    found = COLLECTED.search(done.stderr)
    if not found:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_rank(side: Path, ranks: int, src: Path) -> float:
    """Instructions of one warm read of the side, per rank."""
    return (count(side, 2, src) - count(side, 1, src)) / ranks


def first_ranks(side: Path, ranks: int, into: Path) -> int:
    """Links to the first ``ranks`` rank directories of ``side`` in ``into``; how many."""
    chosen = sorted(p for p in side.iterdir() if p.is_dir())[:ranks]
    for rank_dir in chosen:
        (into / rank_dir.name).symlink_to(rank_dir.resolve())
    return len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", type=Path, help="a directory of rank directories")
    parser.add_argument("--ranks", type=int, default=100, help="rank directories read")
    parser.add_argument("--src", type=Path, default=ROOT,
                        help="directory holding the cann_diff package (default: this checkout)")
    parser.add_argument("--vs-src", type=Path, help="a second revision, for the ratio")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH (apt-get install valgrind)")
    for src in filter(None, (args.src, args.vs_src)):
        if not (src / "cann_diff" / "__init__.py").is_file():
            parser.error(f"{src}: no cann_diff package there")
    with tempfile.TemporaryDirectory() as scratch:
        ranks = first_ranks(args.side, args.ranks, Path(scratch))
        if not ranks:
            parser.error(f"{args.side}: no rank directories")
        counts = {src: per_rank(Path(scratch), ranks, src)
                  for src in filter(None, (args.src, args.vs_src))}
    print(f"| cann_diff from | instructions per rank ({ranks} ranks, a warm read) |")
    print("|---|---:|")
    for src, value in counts.items():
        print(f"| {src} | {value / 1e6:.2f} M |")
    if args.vs_src:
        print(f"\n{args.src} / {args.vs_src}: {counts[args.src] / counts[args.vs_src]:.3f}")


if __name__ == "__main__":
    main()
