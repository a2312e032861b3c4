"""Generate a large, realistic base/new pair of torch_npu text exports for benchmarking.

    python benchmarks/generate.py --rows 1000000 --ranks 1 --out benchmarks/.data/1M

writes::

    OUT/base/node0_<port>_<time>_ascend_pt/            (one directory per rank)
        profiler_info_<rank>.json
        ASCEND_PROFILER_OUTPUT/kernel_details.csv       Level1, aic_metrics=PipeUtilization
        ASCEND_PROFILER_OUTPUT/step_trace_time.csv
        ASCEND_PROFILER_OUTPUT/communication.json
    OUT/new/...                                         same layout

``--rows`` is the number of kernel rows per side (split evenly over the ranks).
By default the base side uses the CANN 8.0-era header (REALDATA.md kernel_details
Variant B: ``OP State``, ``HF32 Eligible``, ``aic_``/``aiv_`` PMU columns, comm core
``HCCL``) and the new side the CANN 8.3 header (Variant E: ``Device_id`` second,
comm core ``COMMUNICATION``, versions in profiler_info). Both carry the trailing TAB
in ``Start Time(us)``, triple-quoted shapes, ``N/A`` columns on ``hcom_*`` rows
(about 2 % of the rows) and several profiler steps. A few hundred distinct operator
keys (aclnn name, type, input shapes, dtypes) are drawn with a skewed frequency.

The new side differs slightly: MatMul / FlashAttention / GroupedMatmul kernels are
5 % faster and about 10 % more AllReduce collectives run (in place of other kernels,
so both sides have exactly ``--rows`` rows).

``--trace beside`` also writes ASCEND_PROFILER_OUTPUT/trace_view.json with the same
kernels (``Ascend Hardware`` / ``HCCL`` events) and their host side: one framework op
(``aten::mm``, ``npu::npu_fusion_attention``, ``c10d::allreduce_``…, with ``Input Dims``)
per kernel or per two kernels, a torch_npu launch record under it, and the
``torch_to_npu`` flow pair (cat ``async_npu``) from the launch to the kernel, and what
torch_npu writes around each launch besides: the task-queue hop (``Enqueue``/``Dequeue@…``
with their ``async_task_queue`` flow), the ``AscendCL@…`` call of the CANN process and its
``HostToDevice`` flow (FORMATS.md §3.3) — 12 events per kernel, where the real Level1
sample (msinsight text/level1, with_stack) has 53. ``--trace only`` writes the trace without
kernel_details.csv (a trace-only export: the kernel level then streams the trace).

Everything is vectorized: columns are numpy arrays, rendered to text and joined into
CSV lines with pyarrow.compute, and written in chunks — no Python loop per row
(only communication.json, 2 % of the rows, is formatted by a list comprehension).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HEAD_B = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,"
          "Start Time(us),Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,"
          "Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
          "Output Formats,Context ID")
PMU_HEADER = ("aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,"
              "aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,"
              "aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),aic_fixpipe_ratio,"
              "aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
              "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),"
              "aiv_mte2_ratio,aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,"
              "cube_utilization(%)")
HEADERS = {
    "B": f"{HEAD_B},{PMU_HEADER}",
    "E": f"{HEAD_B.replace('Step Id,', 'Step Id,Device_id,', 1)},{PMU_HEADER}",
}
N_COLUMNS = {v: len(h.split(",")) for v, h in HEADERS.items()}
STEP_HEADER = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,"
               "Stage,Bubble,Communication(Not Overlapped and Exclude Receive),Preparing")

AIC_PIPES = 5   # mac, scalar, mte1, mte2, fixpipe
AIV_PIPES = 4   # vec, scalar, mte2, mte3
FREQ_MHZ = 1800  # cycles per µs
T0_NS = 1764246877073569640  # first kernel start, ns since epoch
GROUP_TP = "17522688603477080586"
GROUP_DP = "6297232067196334501"
COMM_TYPES = ("hcom_allReduce_", "hcom_allGather_", "hcom_reduceScatter_", "hcom_broadcast_")
COMM_P_BASE = np.array([0.55, 0.25, 0.17, 0.03])  # mix of collective types (base)
COMM_FRACTION = 0.02
EXTRA_ALLREDUCE = 0.10  # new side: 10 % more AllReduce
TYPE_WEIGHT = {"Add": 4, "Mul": 4, "Muls": 3, "Cast": 4, "TensorMove": 3, "MatMulV3": 3,
               "SoftmaxCrossEntropyWithLogits": 0.05, "GatherV2": 0.05, "ForeachMulScalar": 0.3,
               "Range": 0.2, "ZerosLike": 0.5}
FASTER = ("MatMulV3", "FlashAttentionScore", "FlashAttentionScoreGrad", "GroupedMatmul")


@dataclass(frozen=True)
class Catalog:
    """Distinct compute operator keys with their per-key constants (index = key id)."""

    name: np.ndarray        # aclnn kernel name
    type: np.ndarray        # op type
    core: np.ndarray        # AI_CORE / AI_VECTOR_CORE / MIX_AIC / MIX_AIV
    in_shapes: np.ndarray   # "a,b;c,d" (unquoted)
    in_dtypes: np.ndarray
    in_formats: np.ndarray
    out_shapes: np.ndarray
    out_dtype: np.ndarray
    block_dim: np.ndarray   # int
    mix_block: np.ndarray   # int
    dur_us: np.ndarray      # mean duration, µs
    weight: np.ndarray      # relative frequency
    aic_ratio: np.ndarray   # (n, AIC_PIPES) pipe ratios
    aiv_ratio: np.ndarray   # (n, AIV_PIPES)
    icache: np.ndarray      # (n, 2) icache miss rates aic, aiv


def _templates():
    """(name, type, core, shapes(p), out(p), n_inputs, cost(p) µs) over a param dict p."""
    mm = "aclnnMatmul_MatMulV3Common_MatMulV3"
    return [
        (mm, "MatMulV3", "AI_CORE", lambda p: f"{p['t']},{p['h']};{p['h']},{p['n']}",
         lambda p: f"{p['t']},{p['n']}", 2, lambda p: p['t'] * p['h'] * p['n'] / 2.2e8),
        (mm, "MatMulV3", "AI_CORE", lambda p: f"{p['n']},{p['t']};{p['t']},{p['h']}",
         lambda p: f"{p['n']},{p['h']}", 2, lambda p: p['t'] * p['h'] * p['n'] / 2.1e8),
        ("aclnnGroupedMatmul_GroupedMatmul_GroupedMatmul", "GroupedMatmul", "AI_CORE",
         lambda p: f"{p['t']},{p['h']};8,{p['h']},{p['n'] // 4};8",
         lambda p: f"{p['t']},{p['n'] // 4}", 3, lambda p: p['t'] * p['h'] * p['n'] / 6e8),
        ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
         "FlashAttentionScore", "MIX_AIC",
         lambda p: f"1,{p['a']},{p['t']},128;1,{p['a']},{p['t']},128;1,{p['a']},{p['t']},128;;;;;",
         lambda p: f"1,{p['a']},{p['t']},8", 8, lambda p: p['a'] * p['t'] ** 2 / 3e8),
        ("aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
         "FlashAttentionScoreGrad", "MIX_AIC",
         lambda p: f"1,{p['a']},{p['t']},128;1,{p['a']},{p['t']},128;1,{p['a']},{p['t']},128;"
                   f"1,{p['a']},{p['t']},128;;;;",
         lambda p: f"1,{p['a']},{p['t']},128", 8, lambda p: p['a'] * p['t'] ** 2 / 1.4e8),
        ("aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['h']};{p['h']}", lambda p: f"{p['t']},{p['h']}", 2,
         lambda p: p['t'] * p['h'] / 4e5),
        ("aclnnRmsNormGrad_RmsNormGrad_RmsNormGrad", "RmsNormGrad", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['h']};{p['t']},{p['h']};{p['t']},1;{p['h']}",
         lambda p: f"{p['t']},{p['h']}", 4, lambda p: p['t'] * p['h'] / 2.6e5),
        ("aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['n']}", lambda p: f"{p['t']},{p['n'] // 2}", 1,
         lambda p: p['t'] * p['n'] / 4.5e5),
        ("aclnnSwiGluGrad_SwiGluGrad_SwiGluGrad", "SwiGluGrad", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['n'] // 2};{p['t']},{p['n']}", lambda p: f"{p['t']},{p['n']}",
         2, lambda p: p['t'] * p['n'] / 3e5),
        ("aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['h']};{p['t']},{p['h']}", lambda p: f"{p['t']},{p['h']}", 2,
         lambda p: p['t'] * p['h'] / 6e5),
        ("aclnnMul_MulAiCore_Mul", "Mul", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},1;{p['h']}", lambda p: f"{p['t']},{p['h']}", 2,
         lambda p: p['t'] * p['h'] / 7e5),
        ("aclnnMuls_Muls_Muls", "Muls", "AI_VECTOR_CORE",
         lambda p: f"1,{p['t']},{p['h']}", lambda p: f"1,{p['t']},{p['h']}", 1,
         lambda p: p['t'] * p['h'] / 9e5),
        ("aclnnCast_CastAiCore_Cast", "Cast", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['n']}", lambda p: f"{p['t']},{p['n']}", 1,
         lambda p: p['t'] * p['n'] / 8e5),
        ("aclnnInplaceCopy_TensorMove_TensorMove", "TensorMove", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['h']}", lambda p: f"{p['t']},{p['h']}", 1,
         lambda p: p['t'] * p['h'] / 1.1e6),
        ("aclnnInplaceZero_ZerosLikeAiCore_ZerosLike", "ZerosLike", "AI_VECTOR_CORE",
         lambda p: f"{p['h'] * p['n']}", lambda p: f"{p['h'] * p['n']}", 1,
         lambda p: p['h'] * p['n'] / 1.2e6),
        ("aclnnRotaryPositionEmbedding_RotaryPositionEmbedding_RotaryPositionEmbedding",
         "RotaryPositionEmbedding", "AI_VECTOR_CORE",
         lambda p: f"1,{p['t']},{p['a']},128;1,{p['t']},1,128;1,{p['t']},1,128",
         lambda p: f"1,{p['t']},{p['a']},128", 3, lambda p: p['t'] * p['a'] / 4e3),
        ("aclnnTranspose_TransposeAiCore_Transpose", "Transpose", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},{p['a']},128;4", lambda p: f"{p['a']},{p['t']},128", 2,
         lambda p: p['t'] * p['a'] / 2.5e3),
        ("aclnnCat_ConcatD_ConcatD", "ConcatD", "AI_VECTOR_CORE",
         lambda p: f"{p['t']},64;{p['t']},64", lambda p: f"{p['t']},128", 2,
         lambda p: 2 + p['t'] / 2e3),
        ("aclnnSoftmaxCrossEntropyWithLogits_SoftmaxCrossEntropyWithLogits_"
         "SoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", "MIX_AIV",
         lambda p: f"{p['t']},{p['v']};{p['t']},{p['v']}", lambda p: f"{p['t']}", 2,
         lambda p: p['t'] * p['v'] / 2e6),
        ("aclnnEmbedding_GatherV2AiCore_GatherV2", "GatherV2", "AI_VECTOR_CORE",
         lambda p: f"{p['v']},{p['h']};1,{p['t']};1", lambda p: f"1,{p['t']},{p['h']}", 3,
         lambda p: p['t'] * p['h'] / 1.5e6),
        ("aclnnForeachMulScalar_ForeachMulScalar_ForeachMulScalar", "ForeachMulScalar",
         "AI_VECTOR_CORE", lambda p: f"{p['h']},{p['h']};1", lambda p: f"{p['h']},{p['h']}", 2,
         lambda p: p['h'] * p['h'] / 1.4e6),
        ("aclnnArange_ArangeAiCore_Range", "Range", "AI_VECTOR_CORE",
         lambda p: ";;", lambda p: f"{p['t']}", 3, lambda p: 12.0),
    ]


def build_catalog(seed: int = 1234) -> Catalog:
    """A few hundred distinct compute keys: templates x model configurations."""
    rng = np.random.default_rng(seed)
    configs = [dict(t=t, h=h, n=n, a=a, v=v)
               for t in (1024, 2048, 4096, 8192, 16384)
               for h, n, a in ((4096, 5504, 16), (5120, 6912, 20), (8192, 14336, 32))
               for v in (32000, 151936)]
    rows: dict[str, list] = {k: [] for k in Catalog.__dataclass_fields__}
    seen = set()
    for name, typ, core, shapes, out, n_in, cost in _templates():
        for p in configs:
            in_shapes = shapes(p)
            if (name, in_shapes) in seen:
                continue
            seen.add((name, in_shapes))
            float_in = min(n_in, in_shapes.count(";") + 1)
            dtype = "DT_BF16" if typ not in ("Cast", "Range") else "FLOAT"
            dtypes = [dtype] * float_in
            if typ in ("GatherV2", "GroupedMatmul"):
                dtypes[-1] = "INT64"
            if typ == "Range":
                dtypes = ["DOUBLE"] * 3
            rows["name"].append(name)
            rows["type"].append(typ)
            rows["core"].append(core)
            rows["in_shapes"].append(in_shapes)
            rows["in_dtypes"].append(";".join(dtypes))
            rows["in_formats"].append(";".join(["ND"] * len(dtypes)))
            rows["out_shapes"].append(out(p))
            rows["out_dtype"].append(dtypes[0] if typ != "Cast" else "DT_BF16")
            cube = core in ("AI_CORE", "MIX_AIC")
            rows["block_dim"].append(24 if cube else 48)
            rows["mix_block"].append(48 if core.startswith("MIX") else 0)
            rows["dur_us"].append(max(1.5, float(cost(p))))
            # skew: frequent elementwise ops, rarer big kernels, some keys very rare
            rows["weight"].append(TYPE_WEIGHT.get(typ, 1.0) * rng.lognormal(0.0, 1.2))
            rows["aic_ratio"].append(rng.dirichlet(np.ones(AIC_PIPES)) * 0.9)
            rows["aiv_ratio"].append(rng.dirichlet(np.ones(AIV_PIPES)) * 0.9)
            rows["icache"].append(rng.uniform(0.0, 0.3, 2))
    arrays = {k: np.array(v) for k, v in rows.items()}
    arrays["weight"] = arrays["weight"] / arrays["weight"].sum()
    return Catalog(**arrays)


# ---------------------------------------------------------------- text rendering helpers

def _s(values) -> pa.Array:
    """numpy/ pyarrow values → pyarrow string array."""
    return pc.cast(pa.array(values) if not isinstance(values, pa.Array) else values, pa.string())


def _fixed(ns: np.ndarray, decimals: int = 3) -> pa.Array:
    """int64 nanoseconds → µs text with 3 decimals ("1892.920"), exactly (no float)."""
    whole = _s(ns // 1000)
    frac = pc.utf8_lpad(_s(ns % 1000), 3, "0")
    if decimals > 3:
        frac = pc.binary_join_element_wise(frac, "0" * (decimals - 3), "")
    return pc.binary_join_element_wise(whole, frac, ".")


def _num(values: np.ndarray, decimals: int = 3) -> pa.Array:
    """Floats rounded to ``decimals`` → shortest text ("0.052", "18.326", "0")."""
    return _s(np.round(values, decimals))


def _take(table: np.ndarray, index: np.ndarray) -> pa.Array:
    """Per-key constant text picked per row (dictionary decode)."""
    return pc.take(pa.array(table.astype(str)), pa.array(index))


def _join(columns: list, sep: str = ",") -> pa.Array:
    return pc.binary_join_element_wise(*columns, sep)


# ---------------------------------------------------------------- one rank's kernels

def simulate_rank(cat: Catalog, rows: int, steps: int, rank: int, new: bool,
                  seed: int) -> dict[str, np.ndarray]:
    """Kernel rows of one rank as numpy columns (times in int64 ns)."""
    rng = np.random.default_rng(seed)
    key = rng.choice(len(cat.name), size=rows, p=cat.weight)
    comm_p = np.full(rows, COMM_FRACTION)
    comm = rng.random(rows) < comm_p
    probs = COMM_P_BASE.copy()
    if new:  # ~10 % more AllReduce, in place of compute rows
        extra = COMM_FRACTION * COMM_P_BASE[0] * EXTRA_ALLREDUCE
        more = ~comm & (rng.random(rows) < extra / (1 - COMM_FRACTION))
    else:
        more = np.zeros(rows, dtype=bool)
    comm_type = np.where(more, 0, rng.choice(len(COMM_TYPES), size=rows, p=probs))
    comm |= more
    mean = cat.dur_us[key]
    if new:
        mean = mean * np.where(np.isin(cat.type[key], FASTER), 0.95, 1.0)
    dur_us = mean * rng.lognormal(0.0, 0.05, rows)
    comm_us = np.array([900.0, 620.0, 480.0, 150.0])[comm_type] * rng.lognormal(0.0, 0.2, rows)
    dur_ns = (np.where(comm, comm_us, dur_us) * 100).round().astype(np.int64) * 10  # 10 ns grid
    gap_ns = (rng.exponential(3.0, rows) * 1000).astype(np.int64) + 500
    step = np.repeat(np.arange(steps), -(-rows // steps))[:rows]
    step_gap = np.where(np.diff(step, prepend=step[0]) > 0, 40_000_000, 0)  # host gap 40 ms
    gap_ns = gap_ns + step_gap
    gap_ns[0] = 0
    start_ns = T0_NS + rank * 1_500 + np.cumsum(gap_ns + np.r_[0, dur_ns[:-1]])
    return {"key": key, "comm": comm, "comm_type": comm_type, "dur_ns": dur_ns,
            "start_ns": start_ns, "wait_ns": gap_ns, "step": step + 13}


def kernel_lines(cat: Catalog, k: dict[str, np.ndarray], rank: int, variant: str,
                 lo: int, hi: int, comm_seq: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """CSV text of rows [lo, hi) as one string array (each element ends with a newline)."""
    n = hi - lo
    key, comm = k["key"][lo:hi], k["comm"][lo:hi]
    dur_ns = k["dur_ns"][lo:hi]
    dur = dur_ns / 1000.0
    core = cat.core[key]
    cube = np.isin(core, ("AI_CORE", "MIX_AIC", "MIX_AIV"))
    busy = dur * rng.uniform(0.9, 0.99, n)
    aic_t = np.where(cube, busy, 0.0)
    aiv_t = np.where(core != "AI_CORE", busy, 0.0)
    aic_r, aiv_r = cat.aic_ratio[key], cat.aiv_ratio[key]
    pmu = [_num(aic_t), _s((aic_t * FREQ_MHZ).astype(np.int64))]
    for j in range(AIC_PIPES):
        pmu += [_num(aic_t * aic_r[:, j]), _num(np.where(cube, aic_r[:, j], 0.0))]
    pmu += [_num(np.where(cube, cat.icache[key, 0], 0.0)), _num(aiv_t),
            _s((aiv_t * FREQ_MHZ).astype(np.int64))]
    for j in range(AIV_PIPES):
        pmu += [_num(aiv_t * aiv_r[:, j]), _num(np.where(aiv_t > 0, aiv_r[:, j], 0.0))]
    pmu += [_num(np.where(aiv_t > 0, cat.icache[key, 1], 0.0)),
            _num(np.where(cube, aic_r[:, 0] * 100, 0.0))]
    na_pmu = ",".join(["N/A"] * len(PMU_HEADER.split(",")))
    pmu_text = pc.if_else(pa.array(comm), na_pmu, _join(pmu))

    ctype = np.array(COMM_TYPES)[k["comm_type"][lo:hi]]
    comm_name = _join([_s(ctype), str(586 + rank), _s(comm_seq), "1"],
                      "_")
    name = pc.if_else(pa.array(comm), comm_name, _take(cat.name, key))
    typ = pc.if_else(pa.array(comm), _s(ctype), _take(cat.type, key))
    comm_core = "COMMUNICATION" if variant == "E" else "HCCL"
    compute_mid = _join([_take(cat.block_dim, key), _take(cat.mix_block, key), "NO",
                         _take(np.char.add(np.char.add('"""', cat.in_shapes), '"""'), key),
                         _take(cat.in_dtypes, key), _take(cat.in_formats, key),
                         _take(np.char.add(np.char.add('"""', cat.out_shapes), '"""'), key),
                         _take(cat.out_dtype, key), "ND", "N/A"])
    comm_mid = "0," + ",".join(["N/A"] * 9)
    mid = pc.if_else(pa.array(comm), comm_mid, compute_mid)
    task = _s(np.arange(lo, hi) % 60000 + 1000)
    cols = [_s(k["step"][lo:hi])]
    if variant == "E":
        cols.append(str(rank))
    cols += ["4294967295",
             pc.if_else(pa.array(comm), "N/A", task),
             pc.if_else(pa.array(comm), "N/A", "2"),
             name, typ,
             pc.if_else(pa.array(comm), "N/A", "dynamic"),
             pc.if_else(pa.array(comm), comm_core, _take(cat.core, key)),
             pc.binary_join_element_wise(_fixed(k["start_ns"][lo:hi]), "\t", ""),
             _fixed(dur_ns), _fixed(k["wait_ns"][lo:hi], 6), mid, ""]
    line = _join(cols)  # the trailing "" leaves a "," before the PMU block
    line = pc.binary_join_element_wise(line, pmu_text, "")
    return pc.binary_join_element_wise(line, "\n", "")


def _write_strings(handle, lines: pa.Array) -> None:
    """Write the concatenated bytes of a string array (no separators) to ``handle``."""
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32,
                            count=len(lines) + 1, offset=lines.offset * 4)
    data = lines.buffers()[2]
    handle.write(memoryview(data)[offsets[0]:offsets[-1]])


# ---------------------------------------------------------------- the other files

def step_trace(k: dict[str, np.ndarray], variant: str, rank: int) -> str:
    """step_trace_time.csv from the simulated schedule (all kernels serial, comm exposed)."""
    steps = np.unique(k["step"])
    lines = [("Device_id," if variant == "E" else "") + STEP_HEADER]
    for s in steps:
        sel = k["step"] == s
        dur = k["dur_ns"][sel] / 1000.0
        comm = k["comm"][sel]
        computing, communication = dur[~comm].sum(), dur[comm].sum()
        begin = k["start_ns"][sel][0]
        end = (k["start_ns"][sel] + k["dur_ns"][sel]).max()
        stage = (end - begin) / 1000.0
        free = stage - computing - communication
        fields = [s, f"{computing:.3f}", f"{communication:.3f}", "0", f"{communication:.3f}",
                  f"{free:.3f}", f"{stage:.3f}", "0", f"{communication:.3f}", "150.0"]
        lines.append(",".join(([str(rank)] if variant == "E" else []) + [str(f) for f in fields]))
    return "\n".join(lines) + "\n"


def communication_json(k: dict[str, np.ndarray], rank: int, comm_seq: np.ndarray) -> str:
    """communication.json: one collective entry per hcom row, grouped by step."""
    idx = np.flatnonzero(k["comm"])
    elapse = k["dur_ns"][idx] / 1e6
    transit = elapse * 0.6
    wait = elapse * 0.3
    start = k["start_ns"][idx] / 1000.0
    size = np.where(k["comm_type"][idx] == 0, 64.0, 32.0)
    types = np.array(COMM_TYPES)[k["comm_type"][idx]]
    group = np.where(k["comm_type"][idx] == 0, GROUP_DP, GROUP_TP)
    zero = ('{"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, '
            '"Large Packet Ratio": 0, "Size Distribution": {}}')
    entry = ('"%s_%d_%d_1@%s": {"Communication Time Info": {"Start Timestamp(us)": %.3f, '
             '"Elapse Time(ms)": %.6f, "Transit Time(ms)": %.6f, "Wait Time(ms)": %.6f, '
             '"Synchronization Time(ms)": %.6f, "Idle Time(ms)": %.6f, '
             '"Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.3103}, '
             '"Communication Bandwidth Info": {"RDMA": ' + zero + ', "HCCS": '
             '{"Transit Size(MB)": %.1f, "Transit Time(ms)": %.6f, "Bandwidth(GB/s)": %.4f, '
             '"Large Packet Ratio": 0.0, "Size Distribution": {}}, "PCIE": ' + zero +
             ', "SDMA": {"Transit Size(MB)": %.1f, "Transit Time(ms)": %.6f, '
             '"Bandwidth(GB/s)": %.4f, "Large Packet Ratio": 0.0, "Size Distribution": {}}, '
             '"SIO": ' + zero + '}}')
    bw = size / 1024 / np.maximum(transit, 1e-9) * 1000
    steps = k["step"][idx]
    seq = comm_seq[idx]
    parts = []
    for s in np.unique(k["step"]):
        sel = np.flatnonzero(steps == s)
        body = ", ".join(entry % (types[i], 586 + rank, seq[i], group[i], start[i],
                                  elapse[i], transit[i], wait[i], wait[i] * 0.9,
                                  elapse[i] * 0.1, size[i], transit[i], bw[i], size[i],
                                  transit[i], bw[i]) for i in sel)
        parts.append(f'"step{s}": {{"p2p": {{}}, "collective": {{{body}}}}}')
    return "{" + ", ".join(parts) + "}\n"


def profiler_info(rank: int, variant: str) -> dict:
    info = {"config": {"common_config": {"activities": ["ProfilerActivity.CPU",
                                                          "ProfilerActivity.NPU"],
                                         "schedule": {"wait": 0, "warmup": 1, "active": 8,
                                                      "repeat": 1, "skip_first": 12},
                                         "record_shapes": True, "profile_memory": False},
                       "experimental_config": {"_profiler_level": "Level1",
                                               "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                                               "_export_type": ["text"] if variant == "E"
                                               else "text"}},
            "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308,
                           "start_monotonic": 4699801002845430},
            "end_info": {"collectionTimeEnd": 1764246900000000000 + rank,
                         "MonotonicTimeEnd": 4699802061975030}}
    if variant == "E":
        info["torch_npu_version"] = "2.7.1"
        info["cann_version"] = "8.3.RC1"
        info["rank_id"] = str(rank)
    else:
        info["rank_id"] = rank
    return info



# ---------------------------------------------------------------- trace_view.json

PY_PID, HW_PID, HCCL_PID, CANN_PID = 3096504, 3170820512, 3170820576, 3170820320
MAIN_TID, QUEUE_TID = 3096504, 3099702  # the Python thread and torch_npu's dequeue thread
STREAM = 2
FRAMEWORK_OP = {  # kernel type -> the framework operator that launches it
    "MatMulV3": "aten::mm", "GroupedMatmul": "npu::npu_grouped_matmul",
    "FlashAttentionScore": "npu::npu_fusion_attention",
    "FlashAttentionScoreGrad": "npu::npu_fusion_attention_grad",
    "RmsNorm": "npu::npu_rms_norm", "RmsNormGrad": "npu::npu_rms_norm_backward",
    "SwiGlu": "npu::npu_swiglu", "SwiGluGrad": "npu::npu_swiglu_backward",
    "Add": "aten::add", "Mul": "aten::mul", "Muls": "aten::mul", "Cast": "npu::npu_dtype_cast",
    "TensorMove": "aten::copy_", "ZerosLike": "aten::zero_",
    "RotaryPositionEmbedding": "npu::npu_rotary_mul", "Transpose": "aten::contiguous",
    "ConcatD": "aten::cat", "SoftmaxCrossEntropyWithLogits": "aten::cross_entropy_loss",
    "GatherV2": "aten::embedding", "ForeachMulScalar": "aten::_foreach_mul_",
    "Range": "aten::arange"}
C10D = {"hcom_allReduce_": "c10d::allreduce_", "hcom_allGather_": "c10d::allgather_",
        "hcom_reduceScatter_": "c10d::reduce_scatter_", "hcom_broadcast_": "c10d::broadcast_"}
LAUNCH_LAG_NS = 100_000  # host launch runs 100 µs ahead of the device


def framework_ops(k: dict[str, np.ndarray]) -> np.ndarray:
    """Op id of every kernel: a new op per kernel, but every 4th compute kernel joins the op
    before it (one framework op launching two kernels, as conv backward launches several)."""
    i = np.arange(len(k["key"]))
    joins = (i % 4 == 1) & ~k["comm"] & ~np.r_[True, k["comm"][:-1]] & \
        (k["step"] == np.r_[-1, k["step"][:-1]])
    return np.cumsum(~joins) - 1


def _event(fields: list) -> pa.Array:
    return pc.binary_join_element_wise(*fields, "")


def trace_lines(cat: Catalog, k: dict[str, np.ndarray], op: np.ndarray, rank: int,
                lo: int, hi: int, comm_seq: np.ndarray) -> pa.Array:
    """Trace events of kernels [lo, hi): host op (first kernel of an op), launch, flows, kernel."""
    key, comm = k["key"][lo:hi], k["comm"][lo:hi]
    start = k["start_ns"][lo:hi]
    ops = op[lo:hi]
    first = ops != np.r_[op[lo - 1] if lo else -1, ops[:-1]]
    first_kernel = np.searchsorted(op, ops)  # global row of each op's first kernel
    position = np.arange(lo, hi) - first_kernel  # kernel's place in its op
    op_start = k["start_ns"][first_kernel] - LAUNCH_LAG_NS  # the op starts with its launch
    launch = op_start + 50 + position * 200
    kernels_in_op = np.bincount(op[lo:hi] - op[lo], minlength=int(ops[-1] - op[lo]) + 1)
    span = 200 * kernels_in_op[ops - op[lo]] + 100
    ctype = np.array(COMM_TYPES)[k["comm_type"][lo:hi]]
    aten = np.where(comm, np.vectorize(C10D.get)(ctype),
                    np.vectorize(FRAMEWORK_OP.get)(cat.type[key]))
    dims = np.char.replace(cat.in_shapes[key], ";", ";\\r\\n")
    dims = np.where(comm, ";\\r\\n;\\r\\n", dims)
    ts_host, ts_launch, ts_kernel = _fixed(op_start), _fixed(launch), _fixed(start)
    op_event = _event(['{"ph": "X", "name": "', _s(aten), f'", "pid": {PY_PID}, "tid": '
                       f'{MAIN_TID}, "ts": "', ts_host, '", "dur": ', _num(span / 1000.0),
                       ', "cat": "cpu_op", "args": {"Sequence number": -1, '
                       '"Fwd thread id": 0, "Input Dims": "', _s(dims),
                       '", "Input type": "BFloat16"}},\n'])
    api = pc.if_else(pa.array(comm), "HcclAllreduce",  # launch record: the aclnn API
                     pc.list_element(pc.split_pattern(_take(cat.name, key), "_",
                                                      max_splits=1), 0))
    kid = _s(start)
    launch_event = _event(['{"ph": "X", "name": "', api, f'", "pid": {PY_PID}, "tid": '
                           f'{MAIN_TID}, "ts": "', ts_launch, '", "dur": 0.1, "cat": "cpu_op", '
                           '"args": {"Sequence number": -1, "Fwd thread id": 0}},\n'
                           '{"ph": "s", "bp": "e", "name": "torch_to_npu", "id": ', kid,
                           f', "pid": {PY_PID}, "tid": {MAIN_TID}, "ts": "', ts_launch,
                           '", "cat": "async_npu"},\n'])
    # What torch_npu writes around each launch besides (the kernel level parses it too):
    # the task-queue hop to the dequeue thread, the CANN API call, its HostToDevice flow.
    corr, ts_queue = _s(np.arange(lo, hi) + 8226), _fixed(launch + 20_000)
    queue = _event(['{"ph": "X", "name": "Enqueue", "pid": ', str(PY_PID), ', "tid": ',
                    str(MAIN_TID), ', "ts": "', ts_launch, '", "dur": 0.05, "cat": "enqueue", '
                    '"args": {"correlation_id": ', corr, '}},\n{"ph": "s", "bp": "e", "name": '
                    '"enqueue_to_dequeue", "id": ', corr, f', "pid": {PY_PID}, "tid": '
                    f'{MAIN_TID}, "ts": "', ts_launch, '", "cat": "async_task_queue"},\n'
                    '{"ph": "X", "name": "Dequeue@', api, f'", "pid": {PY_PID}, "tid": '
                    f'{QUEUE_TID}, "ts": "', ts_queue, '", "dur": 30.0, "cat": "dequeue", '
                    '"args": {"correlation_id": ', corr, '}},\n{"ph": "f", "bp": "e", "name": '
                    '"enqueue_to_dequeue", "id": ', corr, f', "pid": {PY_PID}, "tid": '
                    f'{QUEUE_TID}, "ts": "', ts_queue, '", "cat": "async_task_queue"},\n'
                    '{"name": "AscendCL@', api, f'", "pid": {CANN_PID}, "tid": {QUEUE_TID}, '
                    '"ts": "', ts_queue, '", "dur": 20.0, "args": {"Thread Id": ',
                    str(QUEUE_TID), ', "Mode": "ACL_OP", "level": "acl", "id": "', api,
                    '", "item_id": "0", "connection_id": ', corr, '}, "ph": "X"},\n'
                    '{"name": "HostToDevice', corr, '", "ph": "s", "cat": "HostToDevice", '
                    '"id": "', corr, f'", "pid": {CANN_PID}, "tid": {QUEUE_TID}, "ts": "',
                    ts_queue, '"},\n'])
    name = pc.if_else(pa.array(comm),
                      _join([_s(ctype), str(586 + rank), _s(comm_seq[lo:hi]), "1"], "_"),
                      _take(cat.name, key))
    pid = np.where(comm, HCCL_PID, HW_PID)
    tid = np.where(comm, 0, STREAM)
    task = pc.if_else(pa.array(comm), "COMMUNICATION", _take(cat.core, key))
    device = _event(['{"name": "HostToDevice', corr, '", "ph": "f", "id": "', corr,
                     '", "ts": "', ts_kernel, '", "cat": "HostToDevice", "pid": ', _s(pid),
                     ', "tid": ', _s(tid), ', "bp": "e"},\n'
                     '{"ph": "f", "bp": "e", "name": "torch_to_npu", "id": ', kid,
                     ', "pid": ', _s(pid), ', "tid": ', _s(tid), ', "ts": "', ts_kernel,
                     '", "cat": "async_npu"},\n{"name": "', name, '", "pid": ', _s(pid),
                     ', "tid": ', _s(tid), ', "ts": "', ts_kernel, '", "dur": ',
                     _fixed(k["dur_ns"][lo:hi]), ', "args": {"Model Id": 4294967295, '
                     '"Task Type": "', task, f'", "Physic Stream Id": {STREAM}, "Task Id": ',
                     _s(np.arange(lo, hi) % 60000 + 1000), ', "Batch Id": 0, '
                     '"Subtask Id": 4294967295, "connection_id": ', _s(np.arange(lo, hi)),
                     '}, "ph": "X"},\n'])
    empty = pa.array([""] * (hi - lo))
    return _event([pc.if_else(pa.array(first), op_event, empty), launch_event, queue, device])


def trace_tail(k: dict[str, np.ndarray]) -> str:
    """ProfilerStep#N windows (host) and the process/thread metadata torch_npu writes last."""
    events = []
    for s in np.unique(k["step"]):
        sel = k["step"] == s
        begin = int(k["start_ns"][sel][0]) - LAUNCH_LAG_NS - 10_000
        end = int((k["start_ns"][sel] + k["dur_ns"][sel]).max())
        events.append(f'{{"ph": "X", "name": "ProfilerStep#{s}", "pid": {PY_PID}, "tid": '
                      f'{MAIN_TID}, "ts": "{begin // 1000}.{begin % 1000:03d}", "dur": '
                      f'{(end - begin) / 1000:.3f}, "cat": "cpu_op", "args": {{}}}}')
    for pid, name in ((PY_PID, "Python"), (HW_PID, "Ascend Hardware"), (HCCL_PID, "HCCL"),
                      (CANN_PID, "CANN")):
        events.append(f'{{"name": "process_name", "pid": {pid}, "tid": 0, '
                      f'"args": {{"name": "{name}"}}, "ph": "M"}}')
    events.append(f'{{"name": "thread_name", "pid": {HW_PID}, "tid": {STREAM}, '
                  f'"args": {{"name": "Stream {STREAM}"}}, "ph": "M"}}')
    events.append(f'{{"name": "thread_name", "pid": {HCCL_PID}, "tid": 0, '
                  f'"args": {{"name": "Group {GROUP_DP} Communication"}}, "ph": "M"}}')
    return ",\n".join(events) + "]\n"


def write_trace(path: Path, cat: Catalog, k: dict[str, np.ndarray], rank: int,
                comm_seq: np.ndarray, chunk: int = 250_000) -> None:
    op = framework_ops(k)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "wb") as handle:
        handle.write(b"[")
        for lo in range(0, len(op), chunk):
            hi = min(len(op), lo + chunk)
            _write_strings(handle, trace_lines(cat, k, op, rank, lo, hi, comm_seq))
        handle.write(trace_tail(k).encode())
    tmp.replace(path)


def write_side(root: Path, cat: Catalog, rows: int, ranks: int, steps: int, new: bool,
               variant: str, seed: int, chunk: int = 250_000, trace: str = "none") -> None:
    per_rank = [rows // ranks + (1 if r < rows % ranks else 0) for r in range(ranks)]
    for rank, n in enumerate(per_rank):
        rank_dir = root / f"node0_{4000 + rank}_20251127190{rank:03d}000_ascend_pt"
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True, exist_ok=True)
        k = simulate_rank(cat, n, steps, rank, new, seed * 1000 + rank)
        comm_seq = np.cumsum(k["comm"]) - 1  # per-rank index of each collective
        rng = np.random.default_rng(seed * 1000 + rank + 7)
        if trace != "only":
            tmp = out / "kernel_details.csv.tmp"
            with open(tmp, "wb") as handle:
                handle.write((HEADERS[variant] + "\n").encode())
                for lo in range(0, n, chunk):
                    hi = min(n, lo + chunk)
                    _write_strings(handle, kernel_lines(cat, k, rank, variant, lo, hi,
                                                        comm_seq[lo:hi], rng))
            tmp.replace(out / "kernel_details.csv")
        if trace != "none":
            write_trace(out / "trace_view.json", cat, k, rank, comm_seq, chunk)
        (out / "step_trace_time.csv").write_text(step_trace(k, variant, rank))
        (out / "communication.json").write_text(communication_json(k, rank, comm_seq))
        (rank_dir / f"profiler_info_{rank}.json").write_text(
            json.dumps(profiler_info(rank, variant), indent=4))


def generate(out: Path, rows: int, ranks: int = 1, steps: int = 8, base_variant: str = "B",
             new_variant: str = "E", seed: int = 7, trace: str = "none",
             same_sequence: bool = False, comm_fraction: float = COMM_FRACTION) -> None:
    """Write ``out/base`` and ``out/new``, each with ``rows`` kernel rows over ``ranks``.

    ``trace``: ``none``, ``beside`` (trace_view.json too) or ``only`` (no kernel_details.csv).
    ``same_sequence`` draws the new side's kernel sequence with the base seed: one model
    run twice (the new side's faster kernels and extra AllReduces still apply), instead of
    two independent draws of the same mix. ``comm_fraction`` of the rows are collectives
    (each one entry of communication.json): raise it for a communication-heavy pair.
    """
    global COMM_FRACTION
    COMM_FRACTION = comm_fraction  # read where the kernels are drawn
    cat = build_catalog()
    write_side(out / "base", cat, rows, ranks, steps, False, base_variant, seed, trace=trace)
    write_side(out / "new", cat, rows, ranks, steps, True, new_variant,
               seed if same_sequence else seed + 1, trace=trace)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=float, default=1_000_000,
                        help="kernel rows per side, all ranks together (default 1000000)")
    parser.add_argument("--ranks", type=int, default=1, help="ranks per side (default 1)")
    parser.add_argument("--steps", type=int, default=8, help="profiler steps (default 8)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/.data/pair"),
                        help="output directory (gets base/ and new/)")
    parser.add_argument("--base-variant", choices=sorted(HEADERS), default="B",
                        help="kernel_details header of the base side (default B)")
    parser.add_argument("--new-variant", choices=sorted(HEADERS), default="E",
                        help="kernel_details header of the new side (default E)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trace", choices=("none", "beside", "only"), default="none",
                        help="also write trace_view.json with host ops and launch flows "
                             "(beside kernel_details.csv, or only the trace)")
    parser.add_argument("--same-sequence", action="store_true",
                        help="new side runs the base side's kernel sequence (one model twice)")
    parser.add_argument("--comm-fraction", type=float, default=COMM_FRACTION,
                        help=f"share of rows that are collectives (default {COMM_FRACTION})")
    args = parser.parse_args(argv)
    rows = int(args.rows)
    if rows < args.ranks * args.steps:
        parser.error("--rows must be at least ranks x steps")
    began = time.perf_counter()
    generate(args.out, rows, args.ranks, args.steps, args.base_variant, args.new_variant,
             args.seed, args.trace, args.same_sequence, args.comm_fraction)
    print(f"wrote {args.out}/base and {args.out}/new: {rows:,} kernel rows per side, "
          f"{args.ranks} rank(s), {args.steps} steps in {time.perf_counter() - began:.1f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
