"""trace_view.json without kernel_details.csv, msprof timeline slices and GPU Kineto traces.

Ascend traces (docs/formats.md §3): device tasks are the ``X`` events of the process
named ``Ascend Hardware``; large communication ops are the op-level events of the
``HCCL`` (older) or ``Communication`` (current msprof) process, i.e. those not on
a ``Plane n`` task thread. Processes are identified by their ``process_name``
metadata only, never by decoding pids. Steps come from ``ProfilerStep#N`` windows.

Kineto traces (``{traceEvents: [...]}``, ``.json`` or ``.json.gz``): events of cat
``kernel``/``gpu_memcpy``/``gpu_memset``. NCCL kernels become communication ops
named so that the canonical stage derives the same ``comm_type`` as for HCCL, and
GEMM kernels get the raw type ``Gemm`` (family MatMul via aliases.json), so a GPU
baseline matches an NPU run at family level.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError, SchemaError
from ..frames import as_category, by_category
from ..rank_data import RankData
from .csv_files import read_step_trace
from .files import is_directory, is_regular, list_dir, present
from .host_links import LinkScan
from .json_files import read_communication, read_profiler_info
from .trace_events import GPU_CATS, STEP_PREFIX, TraceScan, scan_trace
from .values import assign_steps, comm_op_type, drop_impossible_durations, scope_type

FORMAT = "trace_json"
LOOKS_FOR = "ASCEND_PROFILER_OUTPUT/trace_view.json or a *.json[.gz] trace"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TRACE = "trace_view.json"
HARDWARE = "Ascend Hardware"
COMM_PROCESSES = ("HCCL", "Communication")
# Device tasks that are not operators: kernel_details.csv (op_summary) leaves them
# out, so a trace-only reading must too. Matched on the upper-cased task type or
# name with blanks as underscores (types are spelled "Notify Wait" or NOTIFY_WAIT).
NON_OP_TASKS = {
    "NOTIFY_WAIT", "NOTIFY_RECORD", "WRITE_VALUE", "SDMA", "EVENT_RECORD", "EVENT_WAIT",
    "EVENT_RESET", "REDUCE_ASYNC", "REDUCE_ASYNC_V2", "STARS_COMMON", "PROFILING_ENABLE",
    "PROFILING_DISABLE", "MODEL_EXECUTE", "MODEL_MAINTAINCE", "TASK_TIMEOUT_SET",
    "STREAM_SWITCH", "STREAM_ACTIVE", "LABEL_SET", "LABEL_SWITCH", "LABEL_GOTO",
    "EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "PLACE_HOLDER_SQE", "NOTIFY_WAIT_SQE",
    "NOTIFY_RECORD_SQE", "WRITE_VALUE_SQE", "C_CORE_SQE", "CAPTURE_RECORD", "CAPTURE_WAIT",
}
# Runtime task types of the trace -> kernel_details ``Accelerator Core`` vocabulary.
HW_CORES = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE",
            "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV",
            "KERNEL_AICPU": "AI_CPU", "OTHER": "UNKNOWN", "": "UNKNOWN"}
CONV = r"conv|scudnn|fprop|dgrad|wgrad|implicit_gemm|winograd|fft2d|fft_"
GEMM = r"gemm|matmul|cublas"


def output_dir(path: Path) -> Path:
    """The directory that holds trace_view.json (the rank dir or its output dir)."""
    return path if path.name == OUTPUT_DIR or present(path / TRACE) else path / OUTPUT_DIR


def _candidates(folder: Path) -> list[Path]:
    """Kineto trace files of a folder (``*.json.gz``, ``*trace*.json``).

    Only regular files: a folder holding one FIFO or directory of such a name among
    other files is no trace folder.
    """
    return [p for p in list_dir(folder) if not p.name.startswith("profiler_")
            and (p.name.endswith(".json.gz") or (p.suffix == ".json" and "trace" in p.name))
            and is_regular(p)]


def trace_file(path: Path) -> Path | None:
    """The trace of a rank: the file itself, trace_view.json, or a folder's only trace.

    A trace_view.json, or a trace named as the input, that is not a regular file (a
    FIFO, ``/dev/zero``) is still returned: reading it says what it is, where skipping it
    would pass the rank over in silence or say only that no profile was found.
    """
    if is_regular(path):
        return path if path.name.endswith((".json", ".json.gz")) else None
    if not is_directory(path):
        return path if path.name.endswith((".json", ".json.gz")) and present(path) else None
    if present(output_dir(path) / TRACE):
        return output_dir(path) / TRACE
    found = _candidates(path)
    return found[0] if len(found) == 1 else None


def is_rank_dir(path: Path) -> bool:
    """True for a .json/.json.gz file, a rank dir with trace_view.json, or a one-trace folder."""
    return trace_file(path) is not None


def _norm(values: pd.Series) -> pd.Series:
    """Upper case, blanks as underscores (``Notify Wait`` ≡ ``NOTIFY_WAIT``), per category."""
    return by_category(values, lambda v: v.str.strip().str.upper().str.replace(
        " ", "_", regex=False))


def _starts(values: pd.Series, prefix: str) -> np.ndarray:
    return by_category(values, lambda v: v.str.startswith(prefix)).astype(bool).to_numpy()


def ascend_ops(events: pd.DataFrame, include_memcpy: bool) -> pd.DataFrame:
    """Operator rows of an Ascend trace: hardware kernels plus op-level communication.

    ``include_memcpy`` keeps MEMCPY_ASYNC tasks (as type ``MEMCPY_ASYNC``): msprof
    timelines are the only record of host↔device copies there, whereas a torch_npu
    trace_view must match its kernel_details.csv, which has no copy rows.
    """
    hw = events[(events["process"] == HARDWARE).to_numpy()
                & ~_starts(events["thread"], "Step Trace")]
    task, name = _norm(hw["task_type"]), _norm(hw["name"])
    copy = name.str.startswith("MEMCPY").to_numpy()
    non_op = (task.isin(NON_OP_TASKS) | name.isin(NON_OP_TASKS)).to_numpy()
    keep = ~non_op & (~copy | include_memcpy)
    hw, task, copy = hw[keep], task[keep], copy[keep]
    raw_type = by_category(hw["name"], scope_type).where(~copy, "MEMCPY_ASYNC")
    kernels = pd.DataFrame({"op_name": hw["name"], "op_type_raw": raw_type,
                            "core": task.map(HW_CORES).fillna(task),
                            "start_ns": hw["start_ns"], "dur_us": hw["dur_us"]})
    comm = events[events["process"].isin(COMM_PROCESSES).to_numpy()
                  & ~_starts(events["thread"], "Plane")]
    names = comm["name"].astype(str)
    hcom = names.str.extract(r"^(hcom_[A-Za-z]+_)", expand=False)
    comm_ops = pd.DataFrame({"op_name": names, "op_type_raw": hcom.fillna(comm_op_type(names)),
                             "core": "COMMUNICATION", "start_ns": comm["start_ns"],
                             "dur_us": comm["dur_us"]})
    return pd.concat([kernels.astype({"op_name": "object"}), comm_ops], ignore_index=True)


def _gpu_type(names: pd.Series) -> pd.Series:
    """Raw type of a GPU kernel name: Gemm/Gemv/Convolution, hcom_* for NCCL, else short name."""
    lower = names.str.lower()
    short = (names.str.replace(r"^void\s+", "", regex=True)
             .str.replace("(anonymous namespace)::", "", regex=False)
             .str.replace(r"[<(].*$", "", regex=True).str.split("::").str[-1])
    out = short.where(short.str.len() > 0, names)
    out = out.mask(lower.str.contains(GEMM), "Gemm").mask(lower.str.contains("gemv"), "Gemv")
    out = out.mask(lower.str.contains(CONV), "Convolution")
    return out.mask(lower.str.contains("nccl"), comm_op_type(names))


def _memcpy_type(names: pd.Series) -> pd.Series:
    """``MEMCPY_H2D``/``D2H``/``D2D``… from a Kineto copy name (``Memcpy HtoD (…)``)."""
    direction = names.str.extract(r"([HDAP])to([HDAP])", expand=True)
    kind = ("MEMCPY_" + direction[0] + "2" + direction[1]).fillna("MEMCPY")
    return kind.where(names.str.lower().str.contains("memcpy"), "Memset")


def gpu_ops(events: pd.DataFrame) -> pd.DataFrame:
    """Operator rows of a Kineto trace (kernels, copies, memsets)."""
    gpu = events[events["cat"].isin(GPU_CATS).to_numpy()]
    names = gpu["name"].astype(str)
    is_kernel = gpu["cat"].astype(str).str.lower().eq("kernel")
    distinct = pd.Series(names.unique())
    kernel_type = pd.Series(_gpu_type(distinct).to_numpy(), index=distinct.to_numpy())
    copy_type = pd.Series(_memcpy_type(distinct).to_numpy(), index=distinct.to_numpy())
    raw_type = names.map(kernel_type).where(is_kernel, names.map(copy_type))
    nccl = is_kernel & names.str.lower().str.contains("nccl")
    core = pd.Series("GPU", index=gpu.index).mask(nccl, "COMMUNICATION")
    core = core.mask(~is_kernel & raw_type.str.startswith("MEMCPY"), "MEMCPY")
    return pd.DataFrame({"op_name": names, "op_type_raw": raw_type, "core": core,
                         "start_ns": gpu["start_ns"], "dur_us": gpu["dur_us"]})


def step_windows(events: pd.DataFrame) -> pd.DataFrame:
    """``ProfilerStep#N`` windows (ns); device-side annotations win over host ones."""
    steps = events[events["name"].astype(str).str.startswith(STEP_PREFIX).to_numpy()]
    device = steps["cat"].astype(str).eq("gpu_user_annotation")
    if device.any():
        steps = steps[device.to_numpy()]
    ids = pd.to_numeric(steps["name"].astype(str).str.slice(len(STEP_PREFIX)), errors="coerce")
    steps = steps[ids.notna().to_numpy()]
    ids = ids.dropna().astype("int64")
    end = steps["start_ns"] + np.rint(steps["dur_us"].to_numpy() * 1000).astype(np.int64)
    return pd.DataFrame({"step": ids.to_numpy(), "start_ns": steps["start_ns"].to_numpy(),
                         "end_ns": end.to_numpy()})


def finish_ops(ops: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """Order by start, assign steps, make text columns categorical (RankData.ops form)."""
    ops = ops.sort_values("start_ns", kind="stable").reset_index(drop=True)
    start = ops["start_ns"].to_numpy(np.int64)
    out = pd.DataFrame({"start_ns": start, "dur_us": ops["dur_us"].to_numpy(float)})
    for column in ("op_name", "op_type_raw", "core"):
        out[column] = as_category(ops[column])
    out["input_shapes"] = pd.Categorical([""] * len(ops))
    out["input_dtypes"] = pd.Categorical([""] * len(ops))
    out["step"] = assign_steps(start, windows["step"].to_numpy(),
                               windows["start_ns"].to_numpy(), windows["end_ns"].to_numpy())
    return out


def read_events(path: Path, include_memcpy: bool = False, scan: TraceScan | None = None
                ) -> tuple[pd.DataFrame, dict, str, list[str]]:
    """Read one trace file: (raw ops with steps, info, ``ascend``|``kineto``, warnings)."""
    scan = scan_trace(path, scan)
    events = scan.frame()
    if HARDWARE in scan.processes.values():
        ops, kind = ascend_ops(events, include_memcpy), "ascend"
    elif events["cat"].isin(GPU_CATS).any():
        ops, kind = gpu_ops(events), "kineto"
    else:
        raise SchemaError(path, f"no '{HARDWARE}' process and no Kineto kernel events "
                                "(is this a host-only trace?)")
    if ops.empty:
        raise InputError(path, "the trace holds no device operators")
    if kind == "kineto":
        base = scan.top.get("baseTimeNanoseconds")
        # Newer Kineto writes ts relative to baseTimeNanoseconds.
        if base is not None:
            if int(base) > np.iinfo(np.int64).max - int(events["start_ns"].max()):
                raise SchemaError(path, f"baseTimeNanoseconds {base} puts events beyond "
                                        "any clock")
            ops["start_ns"] = ops["start_ns"] + int(base)
            events["start_ns"] = events["start_ns"] + int(base)
    info = _kineto_info(scan.top) if kind == "kineto" else {}
    labels = [v for v in scan.labels.values() if v.startswith("NPU ")]
    if labels and labels[0][4:].strip().isdigit():
        info["device_id"] = int(labels[0][4:])
    ops, warnings = drop_impossible_durations(finish_ops(ops, step_windows(events)), path,
                                              "event dur")
    return ops, info, kind, warnings


def _kineto_info(top: dict) -> dict:
    raw_dist, raw_devices = top.get("distributedInfo"), top.get("deviceProperties")
    dist: dict = raw_dist if isinstance(raw_dist, dict) else {}
    devices: list = raw_devices if isinstance(raw_devices, list) else []
    rank, digits = dist.get("rank"), str(dist.get("rank"))  # isdecimal: int() takes those
    return {"rank": int(rank) if isinstance(rank, int) else int(digits) if digits.isdecimal()
            else None,
            "device": devices[0].get("name") if devices and isinstance(devices[0], dict)
            else None}


def read_rank(path: Path) -> RankData:
    """Read one rank from its trace (plus step_trace_time.csv / communication.json beside it)."""
    trace = trace_file(path)
    if trace is None:
        raise InputError(path, f"no {TRACE} and no single *.json.gz/*trace*.json file")
    scan = LinkScan(trace)  # host→device links kept in the same pass (read/host_links.py)
    ops, info, kind, dropped = read_events(trace, scan=scan)
    root = trace.parent.parent if trace.parent.name == OUTPUT_DIR else trace.parent
    warnings = [f"{trace.name}: trace events carry no input shapes; operators are matched "
                "by type only", *dropped]
    if kind == "ascend":
        infos = sorted(root.glob("profiler_info*.json"))
        if infos:
            info.update(read_profiler_info(infos[0]))
        info["hccl_algorithms"] = scan.algorithms()  # found in the same pass, flows or none
        frequency = scan.aicore_freq()
        if frequency is not None:
            info["aicore_freq"] = frequency
    rank = info.get("rank")
    steps_file = trace.parent / "step_trace_time.csv"
    comm_file = trace.parent / "communication.json"
    steps = read_step_trace(steps_file) if kind == "ascend" and present(steps_file) else None
    comm = read_communication(comm_file, rank if rank is not None else 0) \
        if kind == "ascend" and present(comm_file) else None
    source = trace if is_regular(path) else root
    side = scan.side()  # links, host op spans and HCCL tasks, all from the same pass
    note = "" if side.links is not None else \
        f"{source.name}: no host→device flow events in the trace"
    return RankData(source=source, format=FORMAT, rank=rank, ops=ops, steps=steps, comm=comm,
                    info=info, warnings=tuple(warnings), links=side.links, tasks=side.tasks,
                    host_spans=side.spans, side_read=True, side_note=note)
