"""Generate the examples: a CANN 7.0.1.3-style baseline and two CANN 8.0.RC2-style
candidates of the same 4-layer transformer training job (tensor parallel 2, 2 ranks,
3 profiled steps), written as torch_npu text exports.

The story (field report, CANN 7.0.1.3 → 8.0.RC2): the candidates' kernels are a little
faster (MatMulV3 instead of MatMulV2, faster FlashAttention). Without MC2
(``cann8.0.RC2``) the row-parallel linears that ran as the fused MC2 op MatmulAllReduce
now run as MatMul followed by an exposed hcom_allReduce: more collectives, more exposed
communication, a slower step. With MC2 enabled (``cann8.0.RC2-mc2``) they stay fused and
the candidate is faster than the baseline.

Run from the repository root:  python examples/generate.py
The step_trace_time.csv figures are accounted here from the simulated schedule
(every kernel sequential on the compute stream; the data-parallel gradient
AllReduce overlaps the tail of the backward pass), independently of cann-diff.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYERS = 4
STEPS = (5, 6, 7)
RANKS = (0, 1)
GAP_US = 3.0  # launch gap between kernels on the compute stream
GROUP_TP = "17522688603477080586"
GROUP_DP = "6297232067196334501"

HEADER_CANN7 = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,Accelerator Core,Start Time(us),"
                "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,Input Shapes,"
                "Input Data Types,Input Formats,Output Shapes,Output Data Types,Output Formats,"
                "Context ID,aicore_time(us),aic_total_cycles,aiv_time(us),aiv_total_cycles")
HEADER_CANN8 = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,"
                "Start Time(us),Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,"
                "Input Shapes,Input Data Types,Input Formats,Output Shapes,Output Data Types,"
                "Output Formats,Context ID,aicore_time(us),aic_total_cycles,aiv_time(us),"
                "aiv_total_cycles")

H, S, FFN = 4096, 4096, 5504  # hidden, tokens per micro-batch, TP-local FFN width


def mm(x: tuple, w: tuple) -> str:
    return f"{x[0]},{x[1]};{w[0]},{w[1]}"


def layer_forward(cann8: bool, mc2: bool) -> list[tuple]:
    """(kind, name, type, core, us, shapes) for one layer's forward pass."""
    matmul = ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3") if cann8 else \
        ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2")
    speed = 0.94 if cann8 else 1.0
    fa = 0.95 if cann8 else 1.0
    ops = [
        ("compute", "aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 42.0,
         f"{S},{H};{H}"),
        ("compute", *matmul, "AI_CORE", 610.0 * speed, mm((S, H), (H, 3 * H // 2))),
        ("compute", "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
         "FlashAttentionScore", "MIX_AIC", 880.0 * fa, f"1,16,{S},128;1,16,{S},128"),
    ]
    ops += row_parallel_linear(mc2, matmul, speed, (S, H // 2), (H // 2, H), 400.0)
    ops += [
        ("compute", "aclnnRmsNorm_RmsNorm_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 42.0,
         f"{S},{H};{H}"),
        ("compute", *matmul, "AI_CORE", 1120.0 * speed, mm((S, H), (H, 2 * FFN))),
        ("compute", "aclnnSwiGlu_SwiGlu_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", 95.0,
         f"{S},{2 * FFN}"),
    ]
    ops += row_parallel_linear(mc2, matmul, speed, (S, FFN), (FFN, H), 780.0)
    return ops


def row_parallel_linear(mc2, matmul, speed, x, w, matmul_us) -> list[tuple]:
    """With MC2: fused MatmulAllReduce; without: MatMul + exposed AllReduce."""
    if mc2:
        return [("compute", "aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce",
                 "MatmulAllReduce", "MIX_AIC", matmul_us * 1.08 * speed, f"{mm(x, w)};{w[1]}")]
    return [("compute", *matmul, "AI_CORE", matmul_us * speed, mm(x, w)),
            ("comm", "hcom_allReduce_", "hcom_allReduce_", "HCCL", 900.0, "")]


def layer_backward(cann8: bool) -> list[tuple]:
    """One layer's backward pass; identical collectives on both stacks."""
    matmul = ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3") if cann8 else \
        ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2")
    speed = 0.94 if cann8 else 1.0
    fa = 0.95 if cann8 else 1.0
    grads = []
    for x, w, us in (((S, H), (H, FFN), 800.0), ((S, H), (H, 2 * FFN), 1150.0),
                     ((S, H // 2), (H // 2, H), 420.0), ((S, H), (H, 3 * H // 2), 630.0)):
        grads += [("compute", *matmul, "AI_CORE", us * speed, mm((x[0], w[1]), (w[1], w[0]))),
                  ("compute", *matmul, "AI_CORE", us * 1.05 * speed, mm((x[1], x[0]), x))]
    return [
        *grads[:4],
        ("compute", "aclnnSwiGluGrad_SwiGluGrad_SwiGluGrad", "SwiGluGrad", "AI_VECTOR_CORE",
         150.0, f"{S},{FFN};{S},{2 * FFN}"),
        *grads[4:6],
        ("comm", "hcom_allReduce_", "hcom_allReduce_", "HCCL", 610.0, ""),
        ("compute", "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_"
                    "FlashAttentionScoreGrad", "FlashAttentionScoreGrad", "MIX_AIC",
         1790.0 * fa, f"1,16,{S},128;1,16,{S},128;1,16,{S},128"),
        *grads[6:],
        ("compute", "aclnnRmsNormGrad_RmsNormGrad_RmsNormGrad", "RmsNormGrad", "AI_VECTOR_CORE",
         61.0, f"{S},{H};{S},{H};{H}"),
    ]


def step_schedule(cann8: bool, mc2: bool) -> list[tuple]:
    ops = []
    for _ in range(LAYERS):
        ops += layer_forward(cann8, mc2)
    ops.append(("compute", "aclnnCrossEntropyLoss_CrossEntropyLoss_CrossEntropyLoss",
                "CrossEntropyLoss", "AI_VECTOR_CORE", 310.0, f"{S},32000;{S}"))
    for layer in range(LAYERS):
        backward = layer_backward(cann8)
        if layer == LAYERS - 1:  # data-parallel gradient AllReduce overlaps the last layer
            after_comm = [kind for kind, *_ in backward].index("comm") + 1
            backward.insert(after_comm, ("async", "hcom_allReduce_", "hcom_allReduce_", "HCCL",
                                         5200.0, ""))
        ops += backward
    ops.append(("compute", "aclnnForeachMulScalar_ForeachMulScalar_ForeachMulScalar",
                "ForeachMulScalar", "AI_VECTOR_CORE", 220.0, f"{H},{H}"))
    return ops


def simulate(cann8: bool, mc2: bool, rank: int, step: int, start_us: float,
             rng: random.Random):
    """Lay one step out in time; return kernel rows and the step_trace_time figures."""
    clock, rows, comm_index = start_us, [], 0
    compute_busy, comm_busy, overlapped, pending = 0.0, 0.0, 0.0, []
    for kind, name, typ, core, us, shapes in step_schedule(cann8, mc2):
        dur = round(us * rng.lognormvariate(0, 0.015), 3)
        if kind == "compute":
            begin, end = clock, clock + dur
            overlapped += sum(max(0.0, min(end, e) - max(begin, s)) for s, e in pending)
            compute_busy += dur
            clock = end + GAP_US
        else:
            comm_name = f"hcom_allReduce__{586 + rank}_{comm_index}_1"
            comm_index += 1
            begin = clock
            comm_busy += dur
            if kind == "comm":
                clock = begin + dur + GAP_US
            else:
                pending.append((begin, begin + dur))
            name = comm_name
        rows.append({"step": step, "name": name, "type": typ, "core": core, "start": begin,
                     "dur": dur, "shapes": shapes, "comm": kind != "compute",
                     "group": GROUP_DP if kind == "async" else GROUP_TP})
    end = max([clock - GAP_US] + [e for _, e in pending])
    stage = end - start_us
    not_overlapped = comm_busy - overlapped
    figures = {"Step": step, "Computing": compute_busy,
               "Communication(Not Overlapped)": not_overlapped, "Overlapped": overlapped,
               "Communication": comm_busy, "Free": stage - compute_busy - not_overlapped,
               "Stage": stage, "Bubble": 0, "Communication(Not Overlapped and Exclude Receive)":
               not_overlapped, "Preparing": 150.0}
    return rows, figures, end


def kernel_line(row: dict, cann8: bool, task_id: int) -> list[str]:
    start = f"{row['start']:.3f}" + ("\t" if cann8 else "")
    if row["comm"]:
        ids = ["4294967295", "N/A", "N/A"]
        rest = ["N/A"] * (len(HEADER_CANN8.split(",")) - 10 if cann8 else
                          len(HEADER_CANN7.split(",")) - 10)
        head = [str(row["step"]), *ids, row["name"], row["type"]]
        if cann8:
            return [*head, "N/A", row["core"], start, f"{row['dur']:.3f}", "0", *rest[1:]]
        return [*head, row["core"], start, f"{row['dur']:.3f}", "0", *rest]
    shapes = f'"{row["shapes"]}"'
    dtypes = ";".join(["DT_FLOAT16" if cann8 else "FLOAT16"] * (row["shapes"].count(";") + 1))
    cube = row["core"] in ("AI_CORE", "MIX_AIC")
    pmu = [f"{row['dur'] * 0.9:.3f}" if cube else "0", str(int(row["dur"] * 1800)) if cube
           else "0", "0" if cube else f"{row['dur'] * 0.9:.3f}",
           "0" if cube else str(int(row["dur"] * 1800))]
    common = [row["core"], f"{row['start']:.3f}" + ("\t" if cann8 else ""), f"{row['dur']:.3f}",
              "0", "24", "0" if row["core"] != "MIX_AIC" else "48"]
    io = [shapes, dtypes, "ND", shapes.split(";")[0].rstrip('"') + '"', dtypes.split(";")[0],
          "ND", "N/A"]
    head = [str(row["step"]), "4294967295", str(task_id), "2", row["name"], row["type"]]
    if cann8:
        return [*head, "dynamic", *common, "NO", *io, *pmu]
    return [*head, *common, *io, *pmu]


def comm_json(rows: list[dict], cann8: bool) -> dict:
    out: dict = {}
    for row in rows:
        if not row["comm"]:
            continue
        elapse_ms = row["dur"] / 1000
        transit = elapse_ms * (0.55 if row["group"] == GROUP_TP else 0.7)
        wait = elapse_ms * 0.3
        size = 64.0 if row["group"] == GROUP_TP else 420.0
        links = {link: {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                        "Large Packet Ratio": 0, "Size Distribution": {}}
                 for link in ("RDMA", "HCCS", "PCIE", "SDMA", *(("SIO",) if cann8 else ()))}
        for link in ("HCCS", "SDMA"):
            links[link] = {"Transit Size(MB)": size, "Transit Time(ms)": transit,
                           "Bandwidth(GB/s)": round(size / 1024 / transit * 1000, 4),
                           "Large Packet Ratio": 0.0, "Size Distribution": {}}
        step = out.setdefault(f"step{row['step']}", {"p2p": {}, "collective": {}})
        step["collective"][f"{row['name']}@{row['group']}"] = {
            "Communication Time Info": {
                "Start Timestamp(us)": row["start"], "Elapse Time(ms)": elapse_ms,
                "Transit Time(ms)": transit, "Wait Time(ms)": wait,
                "Synchronization Time(ms)": wait * 0.9,
                "Idle Time(ms)": elapse_ms - transit - wait,
                "Wait Time Ratio": round(wait / (wait + transit), 4),
                "Synchronization Time Ratio": round(wait * 0.9 / (wait * 0.9 + transit), 4)},
            "Communication Bandwidth Info": links}
    return out


# The stack each example records (profiler_info ``cann_version`` / ``torch_npu_version``):
# the torch_npu release built for that CANN.
VERSIONS = {False: ("7.0.1.3", "2.1.0.post3"), True: ("8.0.RC2", "2.1.0.post6")}


def profiler_info(cann8: bool, rank: int) -> dict:
    cann, torch_npu = VERSIONS[cann8]
    info = {"cann_version": cann, "torch_npu_version": torch_npu, "config": {"common_config": {"activities": ["ProfilerActivity.CPU",
                                                          "ProfilerActivity.NPU"],
                                         "schedule": {"wait": 0, "warmup": 1, "active": 3,
                                                      "repeat": 1, "skip_first": 4},
                                         "record_shapes": True, "profile_memory": False},
                       "experimental_config": {"_profiler_level": "Level1",
                                               "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION"}},
            "end_info": {"collectionTimeEnd": 1732870000000000000 + rank,
                         "MonotonicTimeEnd": 4699802061975030}, "rank_id": rank}
    if cann8:
        info["start_info"] = {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308,
                              "start_monotonic": 4699801002845430}
    return info


def write_run(root: Path, cann8: bool, seed: int, mc2: bool | None = None) -> None:
    """One run; MC2 fusion is on for CANN 7 and off for CANN 8 unless ``mc2`` says."""
    mc2 = not cann8 if mc2 is None else mc2
    for rank in RANKS:
        rng = random.Random(seed * 100 + rank)
        rank_dir = root / f"node0_{4000 + rank}_2024112918{rank:02d}00000_ascend_pt"
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True, exist_ok=True)
        start, rows, figures = 1732870000000000.0 + rank * 0.5, [], []
        for step in STEPS:
            step_rows, step_figures, end = simulate(cann8, mc2, rank, step, start, rng)
            rows += step_rows
            figures.append(step_figures)
            start = end + 800.0  # host-side gap between steps
        header = (HEADER_CANN8 if cann8 else HEADER_CANN7).split(",")
        with open(out / "kernel_details.csv", "w", newline="") as handle:
            writer = csv.writer(handle, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
            writer.writerow(header)
            for task_id, row in enumerate(rows, start=11000):
                writer.writerow(kernel_line(row, cann8, task_id))
        with open(out / "step_trace_time.csv", "w", newline="") as handle:
            columns = list(figures[0])
            if not cann8:
                columns.remove("Preparing")
            writer = csv.DictWriter(handle, columns, extrasaction="ignore",
                                    lineterminator="\r\n")
            writer.writeheader()
            for fig in figures:
                writer.writerow({k: (round(v, 3) if isinstance(v, float) else v)
                                 for k, v in fig.items()})
        (out / "communication.json").write_text(json.dumps(comm_json(rows, cann8), indent=1))
        (rank_dir / f"profiler_info_{rank}.json").write_text(
            json.dumps(profiler_info(cann8, rank), indent=4))


def main() -> None:
    write_run(HERE / "cann7.0.1.3", cann8=False, seed=7)
    write_run(HERE / "cann8.0.RC2", cann8=True, seed=8)
    write_run(HERE / "cann8.0.RC2-mc2", cann8=True, seed=9, mc2=True)


if __name__ == "__main__":
    main()
