"""torch_npu / MindSpore db export: ``ascend_{pytorch,mindspore}_profiler_<rank>.db``.

Layout (docs/formats.md §7, §8)::

    <worker>_<timestamp>_ascend_pt|_ascend_ms/
        profiler_info_<rank>.json
        ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db   (msprof tables + framework)
                               analysis.db | communication_analyzer.db

Kernels are TASK ⨝ COMPUTE_TASK_INFO with names resolved through STRING_IDS,
large communication ops come from COMMUNICATION_OP (their ``algType``, the HCCL algorithm,
goes to provenance), steps from STEP_TIME windows.
Every file is opened through an ``immutable`` read-only URI: SQLite then takes no
locks and writes no ``-wal``/``-shm`` files beside the input (the input may sit on
a read-only share, and a diff tool must never touch what it compares). ``immutable``
also ignores a ``-wal`` or hot ``-journal`` left beside the db by a writer that did not
finish (a profiler killed mid-export): the db would be read stale. Such a db is copied,
with its journal, into a temporary directory and the copy is opened instead.

A profiler db of 0 bytes or without any table (SQLite reads both as an empty database)
is no profile: alone, it is refused by name; beside a kernel_details.csv it gives way to
that, as a db without kernel tables does. A kernel or communication op whose name or
type id is missing from STRING_IDS is kept under the name ``(unresolved string id N)``
and counted in a warning: its time is real, but an empty type must not pass for an
operator.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import weakref
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from ...errors import InputError, SchemaError
from ...schema import COMM_COLUMNS, STAGE_FIELDS
from ...vocab.names import canonical_names, comm_types
from ..frames import as_category, concat_frames
from ..rank_data import RankData
from .files import (
    brief,
    is_directory,
    is_regular,
    names_in,
    os_problem,
    present,
    require_file,
    shown,
)
from .hccl_tasks import read_db_tasks
from .json_files import LINK_COLUMNS, LINK_TYPES, read_profiler_info
from .kernel_attributes import (
    BLOCK_ATTRIBUTES,
    BUSY_DB_NAMES,
    DB_ATTRIBUTE_COLUMNS,
    DB_STRING_ATTRIBUTES,
    RATIO_COUNTERS,
    RAW_FIELDS,
    block_text,
    pipe_columns,
)
from .values import (
    assign_steps,
    check_comm_times,
    check_step_figures,
    drop_impossible_durations,
    ids_or_na,
)

FORMAT = "ascend_db"
LOOKS_FOR = "ASCEND_PROFILER_OUTPUT/ascend_{pytorch,mindspore}_profiler_*.db"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
DB_NAME = re.compile(r"^ascend_(pytorch|mindspore)_profiler(?:_(\d+))?\.db$")
MSPROF_DB = re.compile(r"^msprof_\d+.*\.db$")
ANALYSIS_DBS = ("analysis.db", "communication_analyzer.db")
TEXT_FIELDS = ("op_name", "op_type_raw", "core", "input_shapes", "input_dtypes")
NAMING_FIELDS = ("op_name", "op_type_raw")  # what an operator is keyed by: never blank
# COMPUTE_TASK_INFO column -> raw field (STRING_IDS ids). The kernel attributes
# (kernel_attributes.DB_ATTRIBUTE_COLUMNS) come beside them where the table has them.
KERNEL_STRINGS = {"name": "op_name", "opType": "op_type_raw", "taskType": "core",
                  "inputShapes": "input_shapes", "inputDataTypes": "input_dtypes"}
COMM_TIMES = {"elapse_time": "elapse_us", "transit_time": "transit_us",
              "wait_time": "wait_us", "synchronization_time": "synchronization_us",
              "idle_time": "idle_us"}


# What a damaged db raises: sqlite3's errors, pandas' wrapper of them, and the
# UnicodeDecodeError Python raises decoding an error message that quotes damaged bytes.
DB_ERRORS = (sqlite3.Error, pd.errors.DatabaseError, UnicodeDecodeError)
JOURNALS = ("-wal", "-journal")  # what a writer leaves beside a db it did not finish
# The name of a kernel or communication op whose STRING_IDS id the table lacks.
UNRESOLVED = "(unresolved string id {})"
UNRESOLVED_PREFIX = UNRESOLVED.split("{")[0]


class _CopyConnection(sqlite3.Connection):
    """A connection to a private copy of a db; closing it removes the copy."""

    cleanup: weakref.finalize | None = None

    def close(self) -> None:
        try:
            super().close()
        finally:
            cleanup = getattr(self, "cleanup", None)
            if cleanup is not None:
                cleanup()


def _uri(path: Path, options: str) -> str:
    return f"file:{quote(str(path.resolve()), safe='/')}?{options}"


def _pending_journals(path: Path) -> list[Path]:
    """Non-empty ``-wal``/``-journal`` files beside ``path``: changes not yet in the db."""
    journals = [Path(f"{path}{suffix}") for suffix in JOURNALS]
    return [j for j in journals if is_regular(j) and j.stat().st_size > 0]


def _open_copy(path: Path, journals: list[Path]) -> sqlite3.Connection:
    """Copy the db and its journals to a temporary directory and open the copy.

    Read-only first; a hot rollback journal needs a writable db to be rolled back,
    which the private copy may be (the input is never written).
    """
    folder = Path(tempfile.mkdtemp(prefix="cann-diff-db-"))
    try:
        copy = folder / path.name
        shutil.copyfile(path, copy)
        for journal in journals:
            shutil.copyfile(journal, folder / f"{path.name}{journal.name[len(path.name):]}")
        try:
            conn = sqlite3.connect(_uri(copy, "mode=ro"), uri=True, factory=_CopyConnection)
            conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            conn = sqlite3.connect(_uri(copy, "mode=rw"), uri=True, factory=_CopyConnection)
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise InputError(path, f"cannot copy the db with its {journals[0].name[len(path.name):]}"
                               f" to a temporary directory: {os_problem(exc)}") from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    conn.cleanup = weakref.finalize(conn, shutil.rmtree, folder, ignore_errors=True)
    return conn


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to a regular SQLite file that never writes beside it.

    Not validated: the first query says whether the file is a database. A db with a
    pending ``-wal``/``-journal`` is read through a private copy (module docstring).
    """
    require_file(path)
    journals = _pending_journals(path)
    try:
        conn = _open_copy(path, journals) if journals else \
            sqlite3.connect(_uri(path, "mode=ro&immutable=1"), uri=True)
    except sqlite3.Error as exc:
        raise InputError(path, f"cannot open the database: {sqlite_problem(exc)}") from None
    # Text that is not UTF-8 (a damaged page) is read with U+FFFD, not raised mid-query.
    conn.text_factory = _text
    return conn


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def sqlite_problem(exc: Exception) -> str:
    """One line for a sqlite3 error."""
    return brief(" ".join(str(exc).split()) or type(exc).__name__, 200)


def connect(path: Path) -> sqlite3.Connection:
    """Open a SQLite file read-only (see open_readonly); InputError if it is not a database."""
    conn = open_readonly(path)
    try:
        conn.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except DB_ERRORS as exc:
        conn.close()
        raise InputError(path, f"not a readable SQLite database: {sqlite_problem(exc)}") \
            from None
    return conn


def _quoted(name) -> str:
    """A table name as an SQL identifier (a hostile name may hold quotes)."""
    return '"' + str(name).replace('"', '""') + '"'


def tables_of(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Table name -> column names."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    return {n: {r[1] for r in conn.execute(f"PRAGMA table_info({_quoted(n)})")} for n in names}


def find_db(path: Path) -> Path | None:
    """The profiler db of a rank directory (or the db file itself), else None.

    Found by name, whatever the entry is: a FIFO or directory of that name is then
    refused when opened, instead of blocking or being passed over.
    """
    if is_regular(path):
        return path if DB_NAME.match(path.name) or MSPROF_DB.match(path.name) else None
    if not is_directory(path):
        return None
    for folder in (path, path / OUTPUT_DIR):
        found = next((name for name in names_in(folder) if DB_NAME.match(name)), None) \
            if folder is path or is_directory(folder) else None
        if found is not None:
            return folder / found
    return None


def _holds(db: Path) -> str:
    """``kernels`` (COMPUTE_TASK_INFO, or unreadable), ``empty`` (no table) or ``other``.

    An unreadable db counts as one with kernels: read_rank then reports the broken file
    instead of it being skipped.
    """
    try:
        with closing(connect(db)) as conn:
            tables = tables_of(conn)
    except (InputError, *DB_ERRORS):
        return "kernels"
    return "kernels" if "COMPUTE_TASK_INFO" in tables else "other" if tables else "empty"


def has_kernels(db: Path) -> bool:
    """True when the db holds COMPUTE_TASK_INFO (an unreadable db counts as True)."""
    return _holds(db) == "kernels"


def holds_kernels(path: Path) -> bool:
    """A rank result holding a profiler db with kernels (one probe of its tables).

    A db without COMPUTE_TASK_INFO gives way to a kernel_details.csv beside it
    (docs/formats.md §12: priority 1 applies only when the db has kernels), and alone it is
    a kernel-less rank (memory, steps, communication): ``kernelless.py`` reads it. A db
    without any table (or of 0 bytes) is no profile: alone, it is claimed here so that
    ``read_rank`` refuses it by name instead of the rank being read as one without kernels.
    """
    db = find_db(path)
    if db is None:
        return False
    holds = _holds(db)
    return holds == "kernels" or (holds == "empty"
                                  and not present(db.parent / "kernel_details.csv"))


def empty_db_problem(db: Path, tables: dict[str, set[str]]) -> str | None:
    """Why a db without any table is no profile (None when it has tables)."""
    if tables:
        return None
    if require_file(db) == 0:
        return "an empty file (0 bytes), not a profiler database (an interrupted export?)"
    return "a SQLite database without any table, not a profiler export (an interrupted " \
           "export?)"


def is_rank_dir(path: Path) -> bool:
    """True for a rank result holding a profiler db (or a db file).

    A db without COMPUTE_TASK_INFO gives way to a kernel_details.csv beside it
    (docs/formats.md §12 priority 1 applies only when the db has kernels).
    """
    db = find_db(path)
    if db is None:
        return False
    return has_kernels(db) or not present(db.parent / "kernel_details.csv")


def _query(conn: sqlite3.Connection, sql: str, path: Path) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, conn)
    except DB_ERRORS as exc:
        raise SchemaError(path, f"query failed: {exc}") from None


def _column(column: str, present: set[str], table: str, alias: str) -> str:
    return f"{table}.{column} AS {alias}" if column in present else f"NULL AS {alias}"


def string_table(conn: sqlite3.Connection, path: Path) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """STRING_IDS as (sorted ids, value code per sorted id, distinct values + ``""``)."""
    table = _query(conn, "SELECT id, value FROM STRING_IDS", path)
    ids = pd.to_numeric(table["id"], errors="coerce").fillna(-1).to_numpy(np.int64)
    order = np.argsort(ids, kind="stable")
    codes, values = pd.factorize(table["value"].astype("object").fillna("").astype(str))
    categories = pd.Index([*values, ""]).unique()
    return ids[order], codes[order], categories


def resolve(ids: pd.Series, strings: tuple[np.ndarray, np.ndarray, pd.Index],
            name_unknown: bool = False) -> pd.Categorical:
    """Map STRING_IDS ids to text as a categorical, without one Python string per row.

    Joining STRING_IDS in SQL materialises every name once per row; at millions of
    tasks that dominates the read, so ids are looked up with searchsorted instead.
    NULL ids become ``""``; so do unknown ones, or ``(unresolved string id N)`` with
    ``name_unknown`` (an operator's name and type: a blank would pass for a type). A
    column that already holds text is kept.
    """
    if pd.api.types.infer_dtype(ids, skipna=True) in ("string", "mixed"):
        return as_category(ids)
    sorted_ids, codes, categories = strings
    empty = categories.get_loc("")
    numbers = pd.to_numeric(ids, errors="coerce")
    values = numbers.fillna(-1).to_numpy(np.int64)
    if len(sorted_ids) == 0:
        found = np.zeros(len(values), dtype=bool)
        text = np.full(len(values), empty)
    else:
        pos = np.clip(np.searchsorted(sorted_ids, values), 0, len(sorted_ids) - 1)
        found = sorted_ids[pos] == values
        text = np.where(found, codes[pos], empty)
    unknown = ~found & numbers.notna().to_numpy()
    if name_unknown and unknown.any():
        distinct, at = np.unique(values[unknown], return_inverse=True)
        labels = pd.Index([UNRESOLVED.format(number) for number in distinct], dtype=object)
        categories = categories.append(labels).unique()
        text[unknown] = categories.get_indexer(labels)[at]
    return pd.Categorical.from_codes(text, categories=categories)


def unresolved_rows(*columns: pd.Series) -> np.ndarray:
    """Rows where any of ``columns`` (resolved with ``name_unknown``) names a missing id."""
    rows = np.zeros(len(columns[0]) if columns else 0, dtype=bool)
    for column in columns:
        values = pd.Categorical(column)
        marked = values.categories.astype(str).str.startswith(UNRESOLVED_PREFIX)
        rows |= np.asarray(marked, dtype=bool)[values.codes] & (values.codes >= 0)
    return rows


def unresolved_warning(db: Path, kernels: pd.DataFrame | None,
                       comm: pd.DataFrame | None) -> str | None:
    """The warning counting kernels and communication ops named by a missing string id."""
    counts, ids = [], set()
    for frame, what in ((kernels, "kernel(s)"), (comm, "communication op(s)")):
        if frame is None or not len(frame):
            continue
        rows = unresolved_rows(frame["op_name"], frame["op_type_raw"])
        if rows.any():
            counts.append(f"{int(rows.sum())} of {len(frame)} {what}")
            for column in ("op_name", "op_type_raw"):
                named = frame[column][rows].astype(str)
                ids |= set(named[named.str.startswith(UNRESOLVED_PREFIX)].unique())
    if not counts:
        return None
    numbers = sorted(int(label[len(UNRESOLVED_PREFIX):-1]) for label in ids)
    shown_ids = ", ".join(map(str, numbers[:5])) + (", …" if len(numbers) > 5 else "")
    return (f"{shown(db)}: {' and '.join(counts)} have a name or type id missing from "
            f"STRING_IDS ({shown_ids}): kept as '{UNRESOLVED.format('N')}' operators, "
            "which match nothing on the other side (a damaged or partly written export?)")


def read_kernels(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                 strings) -> pd.DataFrame:
    """TASK ⨝ COMPUTE_TASK_INFO: raw kernel rows, times in ns (start and end).

    With the kernel attributes COMPUTE_TASK_INFO records and the pipe ratios of
    TASK_PMU_INFO (``kernel_attributes``), where the db has them.
    """
    missing = [t for t in ("TASK", "COMPUTE_TASK_INFO", "STRING_IDS") if t not in tables]
    if missing:
        raise SchemaError(path, f"no kernel table(s) {', '.join(missing)} (Level_none or a "
                                "db without device data?)")
    info, task = tables["COMPUTE_TASK_INFO"], tables["TASK"]
    lacking = [c for c in ("name", "globalTaskId") if c not in info] + \
              [c for c in ("startNs", "endNs", "globalTaskId") if c not in task]
    if lacking:
        raise SchemaError(path, f"kernel tables lack column(s) {', '.join(lacking)}")
    fields = [_column(c, info, "C", alias) for c, alias in KERNEL_STRINGS.items()]
    attributes = {field: next(c for c in names if c in info)
                  for field, names in DB_ATTRIBUTE_COLUMNS.items()
                  if any(c in info for c in names)}
    fields += [f"C.{column} AS {field}" for field, column in attributes.items()]
    sql = (f"SELECT T.startNs AS start_ns, T.endNs AS end_ns, C.globalTaskId AS task_id, "
           f"{_column('deviceId', task, 'T', 'device_id')}, {', '.join(fields)} "
           f"FROM COMPUTE_TASK_INFO C JOIN TASK T ON T.globalTaskId = C.globalTaskId")
    frame = _query(conn, sql, path)
    for alias in (*KERNEL_STRINGS.values(), *(f for f in DB_STRING_ATTRIBUTES
                                             if f in attributes)):
        frame[alias] = resolve(frame[alias], strings, alias in NAMING_FIELDS)
    for field in BLOCK_ATTRIBUTES:
        if field in attributes:
            frame[field] = block_text(frame[field])
    pipes = pipe_columns(_task_counters(conn, tables, path, frame["task_id"]), len(frame))
    frame = frame.drop(columns="task_id")
    for field, values in pipes.items():
        frame[field] = values
    return frame


def _task_counters(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                   task_ids: pd.Series) -> dict[str, np.ndarray]:
    """The PMU counters of each kernel (``task_ids``) from TASK_PMU_INFO; {} without any.

    The table is long (one row per task and metric, names through STRING_IDS): only the
    metrics ``kernel_attributes`` maps are read, pivoted by SQL to one row per task, then
    placed on the kernel rows by task id. Busy times are stored in ns: µs here.
    """
    if not {"globalTaskId", "name", "value"} <= tables.get("TASK_PMU_INFO", set()):
        return {}
    wanted = {name: name for name in RATIO_COUNTERS} | \
        {name: field for field, name in BUSY_DB_NAMES.items()}
    marks = ", ".join("?" * len(wanted))
    ids = dict(conn.execute(f"SELECT value, id FROM STRING_IDS WHERE value IN ({marks})",
                            list(wanted)).fetchall())
    if not ids:
        return {}
    picks = ", ".join(f"MAX(CASE WHEN name = {int(number)} THEN value END) AS \"{wanted[name]}\""
                      for name, number in ids.items())
    pivot = _query(conn, f"SELECT globalTaskId AS task_id, {picks} FROM TASK_PMU_INFO "
                         f"WHERE name IN ({', '.join(str(int(n)) for n in ids.values())}) "
                         "GROUP BY globalTaskId ORDER BY globalTaskId", path)
    known = pd.to_numeric(pivot["task_id"], errors="coerce").to_numpy(np.float64)
    wanted_ids = pd.to_numeric(task_ids, errors="coerce").to_numpy(np.float64)
    at = np.clip(np.searchsorted(known, wanted_ids), 0, max(len(known) - 1, 0))
    found = (known[at] == wanted_ids) if len(known) else np.zeros(len(wanted_ids), bool)
    counters = {}
    for field in pivot.columns.drop("task_id"):
        values = pd.to_numeric(pivot[field], errors="coerce").to_numpy(np.float64)
        placed = np.where(found, values[at] if len(values) else np.nan, np.nan)
        counters[field] = placed / 1000.0 if field in BUSY_DB_NAMES else placed
    return counters


def read_comm_ops(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                  strings) -> pd.DataFrame | None:
    """COMMUNICATION_OP: one row per large communication op (core ``COMMUNICATION``)."""
    columns = tables.get("COMMUNICATION_OP", set())
    if not {"opName", "startNs", "endNs"} <= columns:
        return None
    sql = (f"SELECT O.startNs AS start_ns, O.endNs AS end_ns, "
           f"{_column('deviceId', columns, 'O', 'device_id')}, O.opName AS op_name, "
           f"{_column('opType', columns, 'O', 'op_type_raw')}, "
           f"{_column('algType', columns, 'O', 'alg_type')} FROM COMMUNICATION_OP O")
    frame = _query(conn, sql, path)
    for alias in ("op_name", "op_type_raw", "alg_type"):
        frame[alias] = resolve(frame[alias], strings, alias in NAMING_FIELDS)
    frame["core"] = pd.Categorical(["COMMUNICATION"] * len(frame))
    for alias in ("input_shapes", "input_dtypes"):
        frame[alias] = pd.Categorical([""] * len(frame))
    return frame


def comm_algorithms(comm: pd.DataFrame | None) -> tuple[tuple[str, str], ...]:
    """Distinct (communication type, ``algType``) pairs of COMMUNICATION_OP rows.

    The type comes from the op name, as for every collective (``hcom_allReduce__307_0_1``
    → ``AllReduce``): ``opType`` is ``N/A`` at Level0. An unknown id reads as ``""``.
    """
    if comm is None or not len(comm):
        return ()
    pairs = pd.DataFrame({"name": comm["op_name"].astype(str),
                          "algorithm": comm["alg_type"].astype(str)}).drop_duplicates()
    return tuple(sorted(set(zip(comm_types(pairs["name"].tolist()),
                                pairs["algorithm"].tolist()))))


def step_windows(conn: sqlite3.Connection, tables: dict[str, set[str]],
                 path: Path) -> pd.DataFrame:
    """STEP_TIME rows (``step``, ``start_ns``, ``end_ns``); empty when steps were not used."""
    if not {"id", "startNs", "endNs"} <= tables.get("STEP_TIME", set()):
        return pd.DataFrame({"step": [], "start_ns": [], "end_ns": []}, dtype="int64")
    frame = _query(conn, "SELECT id AS step, startNs AS start_ns, endNs AS end_ns "
                         "FROM STEP_TIME ORDER BY startNs", path)
    ids = pd.DataFrame({c: ids_or_na(frame[c]) for c in ("step", "start_ns", "end_ns")})
    return ids.dropna().astype("int64")


def _to_ops(frames: list[pd.DataFrame | None], windows: pd.DataFrame,
            path: Path) -> pd.DataFrame:
    """Stack kernel and comm rows into the raw RankData.ops columns, ordered by start."""
    frames = [f for f in frames if f is not None and len(f)]
    if not frames:
        raise InputError(path, "no kernel rows in COMPUTE_TASK_INFO/COMMUNICATION_OP")
    ops = concat_frames(_alike(frames))
    start, end = (pd.Series(ids_or_na(ops[c])) for c in ("start_ns", "end_ns"))
    if start.isna().any():
        raise SchemaError(path, "TASK/COMMUNICATION_OP rows without integer startNs")
    # ns since the epoch lie in [0, 2**62): outside it no subtraction can be trusted, and
    # a NaN duration is left out below as impossible.
    sane = (end.notna() & (end >= 0) & (start >= 0)).to_numpy(bool)
    ops["start_ns"] = start.to_numpy(np.int64)
    dur = np.full(len(ops), np.nan)
    dur[sane] = (end[sane].to_numpy(np.int64) - ops["start_ns"].to_numpy()[sane]) / 1000.0
    ops["dur_us"] = dur
    ops = ops.sort_values("start_ns", kind="stable").reset_index(drop=True)
    start = ops["start_ns"].to_numpy(np.int64)
    out = pd.DataFrame({"start_ns": start, "dur_us": ops["dur_us"].to_numpy(np.float64),
                        "device_id": ids_or_na(ops["device_id"])})
    for field in (*TEXT_FIELDS, *(f for f in RAW_FIELDS if f in ops)):
        out[field] = ops[field].array  # stays categorical
    out["step"] = assign_steps(start, windows["step"].to_numpy(), windows["start_ns"].to_numpy(),
                               windows["end_ns"].to_numpy())
    return out


def _alike(frames: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """The frames with every kernel attribute column any of them has (NaN where missing).

    Collectives carry none; a text attribute missing from a frame is an all-missing
    categorical, so that the stack keeps it categorical.
    """
    present = [f for f in RAW_FIELDS if any(f in frame for frame in frames)]
    alike = []
    for frame in frames:
        lacking = [f for f in present if f not in frame]
        if lacking:
            frame = frame.assign(**{f: np.full(len(frame), np.nan) if f not in
                                    DB_ATTRIBUTE_COLUMNS
                                    else pd.Categorical.from_codes(
                                        np.full(len(frame), -1), categories=[])
                                    for f in lacking})
        alike.append(frame)
    return alike


def _unit_factor(stage: pd.Series, spans_ns: pd.Series) -> float:
    """1000 when StepTraceTime holds ms (as documented), 1 when it already holds µs.

    The documented unit is ms (docs/formats.md §7.3), yet the real MindStudio Insight
    exports store µs (§4 "Observed otherwise"). The stage of a step is at most its
    span, so compare the stored figure with the span in ms: a ratio near 1 means
    ms, near 1000 means µs; the geometric middle (≈31.6) splits the two.
    """
    ratio = (stage / (spans_ns / 1e6)).replace([np.inf, -np.inf], np.nan).dropna()
    ratio = ratio[ratio > 0]
    if ratio.empty:
        return 1000.0
    return 1.0 if float(ratio.median()) > 1000 ** 0.5 else 1000.0


def read_step_trace_table(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                          windows: pd.DataFrame, task_span_ns: int | None,
                          device: int | None) -> pd.DataFrame | None:
    """StepTraceTime -> ``step``, STAGE_FIELDS in µs; None when the table is absent."""
    columns = tables.get("StepTraceTime")
    if not columns:
        return None
    if "stage" not in columns:
        raise SchemaError(path, "StepTraceTime lacks the stage column")
    frame = _query(conn, "SELECT * FROM StepTraceTime", path)
    if "deviceId" in frame and device is not None and frame["deviceId"].nunique() > 1:
        frame = frame[frame["deviceId"] == device]
    text = frame["step"].astype(str) if "step" in frame else pd.Series("", index=frame.index)
    step = pd.to_numeric(text.str.extract(r"(\d{1,9})\s*$", expand=False), errors="coerce")
    out = pd.DataFrame({"step": step.astype("Int64").to_numpy()})
    if "deviceId" in frame:
        out["device_id"] = frame["deviceId"].to_numpy()
    spans = pd.Series(step.to_numpy()).map(
        dict(zip(windows["step"], windows["end_ns"] - windows["start_ns"])))
    if spans.isna().all() and task_span_ns:
        # No step windows: the run's span shared by its steps is each step's upper bound.
        steps_in_run = max(int(step.nunique()), 1)
        spans = pd.Series(float(task_span_ns) / steps_in_run, index=spans.index)
    stage = pd.to_numeric(frame["stage"], errors="coerce").reset_index(drop=True)
    factor = _unit_factor(stage, spans)
    for field in STAGE_FIELDS:
        values = pd.to_numeric(frame[field], errors="coerce") if field in frame else np.nan
        out[field] = np.asarray(values, dtype=float) * factor
    check_step_figures(out, path, {f: f"StepTraceTime.{f}" for f in STAGE_FIELDS})
    return out


def _links(conn, tables, path) -> pd.DataFrame:
    """CommAnalyzerBandwidth -> per (op, group, step) ``<link>_mb`` / ``<link>_us``."""
    need = {"hccl_op_name", "group_name", "transport_type", "transit_size", "transit_time"}
    if not need <= tables.get("CommAnalyzerBandwidth", set()):
        return pd.DataFrame()
    step = "step" if "step" in tables["CommAnalyzerBandwidth"] else "''"
    raw = _query(conn, "SELECT hccl_op_name, group_name, " + step + " AS step, transport_type, "
                       "transit_size, transit_time FROM CommAnalyzerBandwidth", path)
    # One row per packet-size bucket repeats the link totals: keep the first.
    raw["transport_type"] = raw["transport_type"].astype(str).str.lower()
    raw = raw.drop_duplicates(["hccl_op_name", "group_name", "step", "transport_type"])
    wide = raw.pivot(index=["hccl_op_name", "group_name", "step"], columns="transport_type",
                     values=["transit_size", "transit_time"])
    links = pd.DataFrame(index=wide.index)
    for link in (t.lower() for t in LINK_TYPES):
        size = wide.get(("transit_size", link))
        time = wide.get(("transit_time", link))
        links[f"{link}_mb"] = 0.0 if size is None else size.fillna(0.0).astype(float)
        links[f"{link}_us"] = 0.0 if time is None else time.fillna(0.0).astype(float) * 1000
    return links.reset_index()


def read_comm_table(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                    rank: int) -> pd.DataFrame | None:
    """CommAnalyzerTime (+ Bandwidth) -> schema.COMM_COLUMNS + link columns, µs and MB."""
    columns = tables.get("CommAnalyzerTime")
    if not columns:
        return None
    if not {"hccl_op_name", "group_name", *COMM_TIMES} <= columns:
        raise SchemaError(path, "CommAnalyzerTime lacks op name/group/time columns")
    step = "step" if "step" in columns else "''"
    frame = _query(conn, f"SELECT hccl_op_name, group_name, {step} AS step, "
                         f"{', '.join(COMM_TIMES)} FROM CommAnalyzerTime", path)
    frame = frame.rename(columns=COMM_TIMES)
    for target in COMM_TIMES.values():
        frame[target] = pd.to_numeric(frame[target], errors="coerce").fillna(0.0) * 1000.0
    check_comm_times(frame, path, COMM_TIMES.values())
    links = _links(conn, tables, path)
    if len(links):
        frame = frame.merge(links, on=["hccl_op_name", "group_name", "step"], how="left")
    for column in LINK_COLUMNS:
        frame[column] = frame[column].fillna(0.0) if column in frame else 0.0
    check_comm_times(frame, path, LINK_COLUMNS)
    frame["transit_mb"] = frame["sdma_mb"] + frame["rdma_mb"]
    names = frame["hccl_op_name"].astype(str)
    frame["op_name"] = names
    frame["group"] = frame["group_name"].astype(str)
    frame["comm_type"] = canonical_names(names, names, pd.Series("COMM", index=frame.index)
                                         )["op_type"].to_numpy()
    frame["step"] = ids_or_na(frame["step"].astype(str).str.extract(r"(\d{1,9})\s*$",
                                                                    expand=False))
    frame["rank"] = rank
    return frame[[*COMM_COLUMNS, *LINK_COLUMNS]]


def _meta(conn, tables, path, device: int | None) -> dict:
    """Versions from META_DATA, chip from NPU_INFO, rank from RANK_DEVICE_MAP."""
    info: dict = {}
    if {"name", "value"} <= tables.get("META_DATA", set()):
        meta = dict(conn.execute("SELECT name, value FROM META_DATA").fetchall())
        lowered = {str(k).lower(): v for k, v in meta.items()}
        info["cann_version"] = _label(lowered.get("cann_version"))
        info["torch_npu_version"] = _label(lowered.get("torch_npu_version"))
    if {"id", "name"} <= tables.get("NPU_INFO", set()):
        chips = dict(conn.execute("SELECT id, name FROM NPU_INFO").fetchall())
        info["device"] = _label(chips.get(device) or next(iter(chips.values()), None))
    if {"rankId", "deviceId"} <= tables.get("RANK_DEVICE_MAP", set()):
        pairs = conn.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall()
        ranks = pd.to_numeric(pd.Series([r for r, d in pairs if d == device]
                                        or [r for r, _ in pairs], dtype="object"),
                              errors="coerce")
        valid = ranks[(ranks >= 0) & (ranks < 2 ** 31 - 1)]  # -1 / UINT32_MAX = unknown
        info["rank"] = int(valid.iloc[0]) if len(valid) else None
    return info


def _label(value) -> str | None:
    """A version or chip name for the report: text, at most 60 characters."""
    if value is None:
        return None
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return brief(" ".join(text.split()), 60) or None


def _rank_root(db: Path) -> Path:
    return db.parent.parent if db.parent.name == OUTPUT_DIR else db.parent


def _analysis(db: Path) -> Path | None:
    return next((db.parent / n for n in ANALYSIS_DBS if present(db.parent / n)), None)


@contextmanager
def _reading(path: Path):
    """Any sqlite3 error while reading ``path`` is an InputError naming it.

    A db damaged past its first page fails in the middle of a query.
    """
    try:
        yield
    except DB_ERRORS as exc:
        raise InputError(path, f"unreadable SQLite database: {sqlite_problem(exc)}") from None


def read_db_file(db: Path) -> RankData:
    """Read one profiler db (and the analysis.db beside it) into RankData."""
    with _reading(db), closing(connect(db)) as conn:
        tables = tables_of(conn)
        empty = empty_db_problem(db, tables)
        if empty is not None:
            raise InputError(db, empty)
        windows = step_windows(conn, tables, db)
        strings = string_table(conn, db) if "STRING_IDS" in tables else None
        kernels = read_kernels(conn, tables, db, strings)
        collectives = read_comm_ops(conn, tables, db, strings)
        unresolved = unresolved_warning(db, kernels, collectives)
        algorithms = comm_algorithms(collectives)  # for provenance, not kept with the rows
        tasks = read_db_tasks(conn, tables, db, strings, _query, resolve)  # HCCL task level
        ops = _to_ops([kernels, collectives if collectives is None
                       else collectives.drop(columns="alg_type")], windows, db)
        ops, warnings = drop_impossible_durations(ops, db, "duration (endNs - startNs)")
        warnings += [unresolved] if unresolved is not None else []
        devices = ops["device_id"].dropna()
        device = int(devices.mode().iloc[0]) if len(devices) and devices.max() >= 0 else None
        info = _meta(conn, tables, db, device)
        ends = ops["start_ns"] + np.rint(ops["dur_us"].to_numpy() * 1000).astype(np.int64)
        task_span = int(ends.max() - ops["start_ns"].min())
    root = _rank_root(db)
    label = db.name if db.parent == root else f"{db.parent.name}/{db.name}"
    info["hccl_algorithms"] = (f"{label}: COMMUNICATION_OP.algType", algorithms)
    infos = sorted(root.glob("profiler_info*.json"))
    if infos:
        info.update({k: v for k, v in read_profiler_info(infos[0]).items() if v is not None})
    match = DB_NAME.match(db.name)
    if info.get("rank") is None and match and match.group(2) and len(match.group(2)) < 10:
        info["rank"] = int(match.group(2))
    rank = info.get("rank")
    steps = comm = None
    analysis = _analysis(db)
    if analysis is None:
        warnings.append(f"{db.name}: no analysis.db beside it; step breakdown and "
                        "communication detail unavailable")
    else:
        with _reading(analysis), closing(connect(analysis)) as conn:
            extra = tables_of(conn)
            empty = empty_db_problem(analysis, extra)
            if empty is not None:
                warnings.append(f"{shown(analysis)}: {empty}; step breakdown and "
                                "communication detail unavailable")
            steps = read_step_trace_table(conn, extra, analysis, windows, task_span, device)
            comm = read_comm_table(conn, extra, analysis, rank if rank is not None else 0)
    fmt = "ascend_ms_db" if "mindspore" in db.name else FORMAT
    return RankData(source=root, format=fmt, rank=rank, ops=ops, steps=steps, comm=comm,
                    info=info, warnings=tuple(warnings), tasks=tasks)


def read_rank(path: Path) -> RankData:
    """Read one rank's db export (directory, ASCEND_PROFILER_OUTPUT or the .db file)."""
    db = find_db(path)
    if db is None:
        raise InputError(path, "no ascend_pytorch_profiler_*.db or ascend_mindspore_profiler_*.db")
    return read_db_file(db)
