"""What keeping the HCCL task events costs on top of the host-side read of a trace.

    python benchmarks/hccl_cost.py                   # 1M kernels, median of 3
    python benchmarks/hccl_cost.py --rows 200000 --repeat 5

Beside a kernel_details.csv, trace_view.json is read once, by the select pass of
read/formats/trace_select.py (only the events holding a wanted string are parsed). For the
framework-operator level that pass wants the host side (``cpu_op``, ``python_function``,
the launch flows, ``alg_type``); keeping the HCCL tasks adds the plane task events (the
key ``link type``) and the process and thread names. The target: at most 30 % on top.

The trace is the one benchmarks/generate.py writes (``--trace beside``: every kernel with
its framework op, launch record, flows, task-queue hop and CANN call; collectives on the
``HCCL`` process), with what a Level1 msprof trace of an Atlas A2 adds for each collective:
``alg_type`` on the op-level event, and 8 threads ``Plane 0``..``Plane 7``, each holding
``--tasks`` task events (Notify_Record, Notify_Wait, Memcpy and Reduce_Inline over HCCS, on
plane 0 the local ON_CHIP copies), with the args msprof writes (``notify_id``, ``task
type``, ``src rank``, ``dst rank``, ``transport type``, ``size(Byte)``, ``link type``,
``bandwidth(GB/s)``, …). At 1M kernels and 2 % collectives that is 20,000 collectives and
1.6M task events. Cached under ``benchmarks/.data/hccl_<rows>/trace_view.json``.

Each mode runs ``read_trace_side`` in a fresh subprocess (timed inside it, no interpreter
start), alternately without the tasks (``tasks=False``: the host-side read as the
framework level does it) and with them; ``--reduce`` also times turning the tasks into the
per-collective frame (reduce/collectives.py). Printed: median CPU and wall seconds of
each, and the ratio with/without (CPU time is steadier on a shared machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import generate as gen  # noqa: E402  (the benchmark generator beside this script)

PLANES = 8
# One plane's tasks of a collective, in order: (task type, link type, moves data).
PATTERN = [("Notify_Record", "INVALID_TYPE", False), ("Notify_Wait", "INVALID_TYPE", False),
           ("Memcpy", "HCCS", True), ("Notify_Record", "INVALID_TYPE", False),
           ("Notify_Wait", "INVALID_TYPE", False), ("Reduce_Inline", "HCCS", True),
           ("Notify_Record", "INVALID_TYPE", False), ("Notify_Wait", "INVALID_TYPE", False),
           ("Memcpy", "HCCS", True), ("Notify_Wait", "INVALID_TYPE", False)]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
mode, trace, reduce = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1"


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


from cann_diff.read.formats.host_links import read_trace_side
from cann_diff.read.reduce.collectives import collective_frames
began, began_cpu = time.perf_counter(), cpu()
side = read_trace_side(trace, tasks=mode == "tasks")
seconds, cpu_seconds = time.perf_counter() - began, cpu() - began_cpu
out = {"seconds": seconds, "cpu": cpu_seconds,
       "tasks": 0 if side.tasks is None else len(side.tasks.tasks),
       "ops": 0 if side.tasks is None else len(side.tasks.ops)}
if reduce and side.tasks is not None:
    began_cpu = cpu()
    frames = collective_frames(side.tasks, None, False)
    out["reduce_cpu"] = cpu() - began_cpu
    out["collectives"] = len(frames.collectives)
print(json.dumps(out))
"""


def task_lines(k: dict[str, np.ndarray], tasks: int) -> pa.Array:
    """Plane task events of every collective of ``k`` (one string per task, ``,\\n`` ended)."""
    pattern = PATTERN[:tasks] if tasks <= len(PATTERN) else \
        (PATTERN * (tasks // len(PATTERN) + 1))[:tasks]
    comm = np.flatnonzero(k["comm"])
    per = PLANES * len(pattern)
    row = np.repeat(comm, per)
    plane = np.tile(np.repeat(np.arange(PLANES), len(pattern)), len(comm))
    slot = np.tile(np.arange(len(pattern)), len(comm) * PLANES)
    kind = np.array([p[0] for p in pattern])[slot]
    link = np.array([p[1] for p in pattern])[slot]
    moves = np.array([p[2] for p in pattern])[slot]
    # plane 0 copies on the chip (local input to the CCL buffer), the others over HCCS
    link = np.where(moves & (plane == 0), "ON_CHIP", link)
    width = k["dur_ns"][row] // len(pattern)
    start = k["start_ns"][row] + slot * width + plane * 40
    dur = np.maximum(width * 8 // 10, 20)
    size = np.where(moves, 2_064_384, 0)
    dst = np.where(plane == 0, 0, plane)
    return gen._event([
        '{"name": "', gen._s(kind), f'", "pid": {gen.HCCL_PID}, "tid": ', gen._s(plane + 1),
        ', "ts": "', gen._fixed(start), '", "dur": ', gen._fixed(dur), ', "args": {"notify_id": '
        '"18446744073709551615", "duration estimated(us)": 1.0, "stream id": 4, "task id": ',
        gen._s(np.arange(len(row)) % 60000), ', "context id": ', gen._s(slot), ', "task type": "',
        gen._s(kind), '", "src rank": 0, "dst rank": ', gen._s(dst), ', "transport type": "',
        gen._s(np.where(kind == "Notify_Wait", "LOCAL", "SDMA")), '", "size(Byte)": ',
        gen._s(size), ', "data type": "INVALID_TYPE", "link type": "', gen._s(link),
        '", "bandwidth(GB/s)": 0.0, "model id": 4294967295}, "ph": "X"},\n'])


def write(path: Path, rows: int, tasks: int, seed: int = 7, chunk: int = 250_000) -> None:
    """A trace_view.json of ``rows`` kernels with HCCL plane tasks (module docstring)."""
    cat = gen.build_catalog()
    k = gen.simulate_rank(cat, rows, 8, 0, False, seed * 1000)
    comm_seq = np.cumsum(k["comm"]) - 1
    op = gen.framework_ops(k)
    tmp = path.with_suffix(".json.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as handle:
        handle.write(b"[")
        for lo in range(0, rows, chunk):
            hi = min(rows, lo + chunk)
            lines = gen.trace_lines(cat, k, op, 0, lo, hi, comm_seq)
            # the op-level events carry the algorithm, as msprof writes them
            lines = pc.replace_substring(lines, '"Task Type": "COMMUNICATION"',
                                         '"Task Type": "COMMUNICATION", "alg_type": '
                                         '"MESH-RING", "count": 4097000')
            gen._write_strings(handle, lines)
        gen._write_strings(handle, task_lines(k, tasks))
        names = "".join(f'{{"name": "thread_name", "pid": {gen.HCCL_PID}, "tid": {p + 1}, '
                        f'"args": {{"name": "Plane {p}"}}, "ph": "M"}},\n'
                        for p in range(PLANES))
        handle.write(names.encode())
        handle.write(gen.trace_tail(k).encode())
    tmp.replace(path)


def run_child(mode: str, trace: Path, reduce: bool) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(trace), "1" if reduce else "0"],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1_000_000, help="kernels (default 1M)")
    parser.add_argument("--tasks", type=int, default=10, help="tasks per plane per collective")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reduce", action="store_true", help="also time the per-op reduce")
    args = parser.parse_args(argv)
    rows = int(args.rows)
    trace = HERE / ".data" / f"hccl_{rows}_{args.tasks}" / "trace_view.json"
    if not trace.is_file():
        began = time.perf_counter()
        write(trace, rows, args.tasks)
        print(f"wrote {trace} ({trace.stat().st_size / 2**30:.2f} GiB) in "
              f"{time.perf_counter() - began:.0f} s", file=sys.stderr)
    runs: dict[str, list[dict]] = {"host": [], "tasks": []}
    for _ in range(args.repeat):
        for mode in runs:
            runs[mode].append(run_child(mode, trace, args.reduce and mode == "tasks"))
    cpu = {m: statistics.median(r["cpu"] for r in rs) for m, rs in runs.items()}
    wall = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
    last = runs["tasks"][-1]
    print(f"trace: {trace.stat().st_size / 2**30:.2f} GiB, {rows:,} kernels, "
          f"{last['ops']:,} collectives, {last['tasks']:,} task events")
    print("| read | CPU s | wall s |\n|---|---|---|")
    print(f"| host side only (framework level) | {cpu['host']:.2f} | {wall['host']:.2f} |")
    print(f"| host side + HCCL tasks | {cpu['tasks']:.2f} | {wall['tasks']:.2f} |")
    print(f"| ratio | {cpu['tasks'] / cpu['host']:.3f} | {wall['tasks'] / wall['host']:.3f} |")
    if args.reduce:
        reduce_cpu = statistics.median(r["reduce_cpu"] for r in runs["tasks"])
        print(f"reduce of the tasks to {last['collectives']:,} collectives: {reduce_cpu:.2f} "
              "CPU s")


if __name__ == "__main__":
    main()
