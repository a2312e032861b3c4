"""How fast ``cann-diff --help`` answers, against importing the heavy stack it avoids.

    python benchmarks/startup.py              # median of 9 runs each
    python benchmarks/startup.py --repeat 21 --json startup.json

Times, as subprocesses on this machine (wall clock, interpreter start included):

* **help** — ``python -m cann_diff --help`` (the package imported from ``--src``, default
  this checkout);
* **version** — ``python -m cann_diff --version``;
* **heavy** — ``python -c "import pandas, scipy.stats, matplotlib.pyplot"``, what a run
  that needs the pipeline pays before it starts;
* **python** — ``python -c pass``, the interpreter alone (for reference).

Prints a Markdown table and the ratio help / heavy; the target is at most 0.25 (``--help``
must not import the pipeline). Exit status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.25
COMMANDS = {
    "help": ["-m", "cann_diff", "--help"],
    "version": ["-m", "cann_diff", "--version"],
    "heavy": ["-c", "import pandas, scipy.stats, matplotlib.pyplot"],
    "python": ["-c", "pass"],
}


def time_once(args: list[str], src: Path) -> float:
    """Seconds of wall time for one ``python ARGS`` run from ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=src, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(repeat: int, src: Path) -> dict[str, float]:
    """Median seconds per command; the runs interleave so a load spike hits all alike."""
    for args in COMMANDS.values():  # warm the file cache and the .pyc files
        time_once(args, src)
    samples = {name: [] for name in COMMANDS}
    for _ in range(repeat):
        for name, args in COMMANDS.items():
            samples[name].append(time_once(args, src))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs per command (median)")
    parser.add_argument("--src", type=Path, default=ROOT, help="checkout to import from")
    parser.add_argument("--json", type=Path, help="also save the medians here")
    args = parser.parse_args()
    medians = measure(args.repeat, args.src.resolve())
    ratio = medians["help"] / medians["heavy"]
    print(f"| command | median of {args.repeat} (ms) |")
    print("|---|---:|")
    for name, args_ in COMMANDS.items():
        print(f"| `python {shlex.join(args_)}` | {medians[name] * 1000:.0f} |")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"\n--help / heavy imports = {ratio:.3f} (target ≤ {TARGET}: {verdict})")
    if args.json:
        args.json.write_text(json.dumps({"medians_s": medians, "ratio": ratio,
                                         "target": TARGET}, indent=2) + "\n")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
