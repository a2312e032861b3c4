"""kernel_details.csv / op_summary_*.csv and step_trace_time.csv → canonical frames.

Every quirk of the text export is handled here and nowhere else: header variants
(docs/formats.md §2, §13), ``N/A`` ids, the trailing TAB inside ``Start Time(us)``,
triple-quoted shapes, ``Block Dim``/``Block Num``, optional ``Device_id``.
Files are read with pyarrow's CSV reader, only the needed columns, names as
dictionary (categorical) columns.
"""

from __future__ import annotations

import csv
import io
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...errors import InputError, SchemaError
from ...schema import STAGE_FIELDS
from ...settings import DEFAULT_LIMITS
from .files import brief, open_binary, os_problem, require_file, size_text
from .kernel_attributes import ATTRIBUTE_HEADERS, COUNTER_FIELDS, COUNTER_HEADERS, pipe_columns
from .values import MAX_WHOLE_US, check_step_figures, drop_impossible_durations

# canonical field -> accepted headers, kernel_details first, op_summary second.
KERNEL_HEADERS = {
    "op_name": ("Name", "Op Name"),
    "op_type_raw": ("Type", "OP Type"),
    "core": ("Accelerator Core", "Task Type"),
    "start": ("Start Time(us)", "Task Start Time(us)"),
    "dur_us": ("Duration(us)", "Task Duration(us)"),
    "step": ("Step Id", "Step ID"),
    "device_id": ("Device_id",),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
    # Why a kernel took its time (kernel_attributes.py): text attributes, PMU counters.
    **ATTRIBUTE_HEADERS,
    **COUNTER_HEADERS,
}
REQUIRED = ("op_name", "start", "dur_us")
DICTIONARY_FIELDS = ("op_name", "op_type_raw", "core", "input_shapes", "input_dtypes",
                     *ATTRIBUTE_HEADERS)
# Fields Arrow parses as numbers; a value it cannot parse has the table read as text.
KERNEL_NUMBERS = ("dur_us", "step", *COUNTER_FIELDS)
# Below this size (bytes) a kernel table's text columns are read as text, not dictionaries.
TEXT_TABLE_BYTES = 1 << 20
STEP_HEADERS = {
    "Step": "step",
    "Device_id": "device_id",
    "Computing": "computing",
    "Communication(Not Overlapped)": "communication_not_overlapped",
    "Overlapped": "overlapped",
    "Communication": "communication",
    "Free": "free",
    "Stage": "stage",
    "Bubble": "bubble",
    "Preparing": "preparing",
}
NULLS = ["", "N/A", "NA", "null", "NULL"]
# The step figures a step table must have.
STEP_NEEDED = ("computing", "communication_not_overlapped", "free", "stage")


def read_header(path: Path) -> list[str]:
    """Return the header row of a CSV file; raise InputError when there is none.

    Only the first ``max_header_bytes`` are read: a file without a line break is not
    read whole as one header. The answer is kept per (file, size, mtime), so the several
    readers that ask for one file's header open it once.
    """
    try:
        stat = path.stat()
    except OSError:
        return list(_read_header(path))  # let the open report the problem
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    header = _HEADERS.get(key)
    if header is None:
        header = _read_header(path)
        _remember_header(key, header)
    return list(header)


# Headers by (file, size, mtime), the most recent kept. Enough for a chunk's stacked ranks
# (``text_batch``: up to 512 ranks of two tables each), whose kernel headers provenance
# asks for again once the chunk is read.
HEADERS_KEPT = 2048
_HEADERS: dict[tuple[str, int, int], tuple[str, ...]] = {}
_HEADERS_LOCK = threading.Lock()  # a Dask worker reads ranks in several threads


def _remember_header(key: tuple[str, int, int], header: tuple[str, ...]) -> None:
    with _HEADERS_LOCK:
        _HEADERS.pop(key, None)
        _HEADERS[key] = header
        while len(_HEADERS) > HEADERS_KEPT:
            del _HEADERS[next(iter(_HEADERS))]


# The first read of a header: a header row is 1-3 KB, and a read of ``max_header_bytes``
# (1 MiB) at once allocated that much for every file (0.11 of a header's 0.15 ms).
HEADER_CHUNK_BYTES = 1 << 14


def header_end(head: bytes | bytearray, start: int = 0, quotes: int = 0
               ) -> tuple[int, int, int]:
    """Where the header row in ``head`` ends: after its first line break outside quotes.

    The scan starts at ``start`` (a line's start) with ``quotes`` counted before it, so
    that a header read in chunks is scanned once. Returns (the end, -1 when ``head`` holds
    no such break yet: a quoted name may hold one; where the next scan starts; the quotes
    counted before that).
    """
    while (end := head.find(b"\n", start)) >= 0:
        quotes += head.count(b'"', start, end)
        if quotes % 2 == 0:
            return end + 1, end + 1, quotes
        start = end + 1
    return -1, start, quotes


def _read_header(path: Path) -> tuple[str, ...]:
    limit = DEFAULT_LIMITS.max_header_bytes
    head, end, start, quotes = bytearray(), -1, 0, 0
    with open_binary(path) as handle:
        try:  # a chunk at a time, until the header row ends, the file ends or the limit
            while end < 0 and len(head) < limit:
                chunk = handle.read(min(HEADER_CHUNK_BYTES, limit - len(head)))
                if not chunk:
                    break
                head += chunk
                end, start, quotes = header_end(head, start, quotes)
        except OSError as exc:
            raise InputError(path, f"cannot read: {os_problem(exc)}") from None
    if end < 0 and len(head) == limit and b"\n" not in head:
        raise InputError(path, f"no header line in the first {size_text(limit)} "
                               "(not a CSV export?)")
    # No break outside quotes (an odd quote in a name): the csv module reads what was read,
    # as it did all of the limit before the reads came in chunks.
    return _parsed_header(head[:end if end >= 0 else len(head)], path)


def _parsed_header(row: bytes | bytearray, path: Path) -> tuple[str, ...]:
    """The names of a header row's bytes, stripped; InputError when it names nothing."""
    text = row.decode("utf-8-sig", errors="replace")
    try:
        header = next(csv.reader(io.StringIO(text)), None)
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV header: {exc}") from None
    if not header or not any(h.strip() for h in header):
        raise InputError(path, "empty file (no header row)")
    return tuple(h.strip() for h in header)


# The PMU columns follow the chip's AI Core layout (docs/formats.md §2.3): cube and vector
# cores apart carry ``aic_``/``aiv_`` prefixes (Atlas A2/A3: Ascend910B on), one AI Core doing
# both writes them unprefixed (Ascend910A-style). ``total_cycles`` is in every metric set.
SPLIT_PMU_PREFIXES = ("aic_", "aiv_")
UNIFIED_PMU_COLUMN = "total_cycles"
SPLIT_CORES = "Ascend910B-class (separate cube and vector cores)"
UNIFIED_CORE = "Ascend910A-class (unified AI Core)"


def core_layout_hint(header: list[str]) -> str | None:
    """The chip class a kernel table's PMU columns imply: a hint, never a recorded device.

    None without PMU columns (Level0, ``aic_metrics=AiCoreNone``).
    """
    if any(name.startswith(SPLIT_PMU_PREFIXES) for name in header):
        return SPLIT_CORES
    return UNIFIED_CORE if UNIFIED_PMU_COLUMN in header else None


def check_unique(path: Path, header: list[str], wanted) -> None:
    """InputError when a column to be read appears more than once in the header.

    Which of two ``Duration(us)`` columns holds the durations cannot be known, and
    quietly taking the first would give an answer nobody could check.
    """
    for name in wanted:
        if header.count(name) > 1:
            raise InputError(path, f"column {brief(repr(name))} appears {header.count(name)} "
                                   "times in the header; which one to read is ambiguous")


def _pick(header: list[str], aliases: dict[str, tuple[str, ...]]) -> dict[str, str]:
    present = set(header)
    picked = {}
    for field, names in aliases.items():
        for name in names:
            if name in present:
                picked[field] = name
                break
    return picked


def read_csv_columns(path: Path, columns: dict[str, str],
                     dictionary: tuple[str, ...] = (),
                     numeric: tuple[str, ...] = ()) -> pd.DataFrame:
    """``read_csv_counted`` without the count of skipped rows."""
    return read_csv_counted(path, columns, dictionary, numeric)[0]


def read_csv_counted(path: Path, columns: dict[str, str],
                     dictionary: tuple[str, ...] = (),
                     numeric: tuple[str, ...] = ()) -> tuple[pd.DataFrame, int]:
    """``read_table_counted`` as a pandas frame."""
    table, skipped = read_table_counted(path, columns, dictionary, numeric)
    return table.to_pandas(), skipped


def read_table_counted(path: Path, columns: dict[str, str],
                       dictionary: tuple[str, ...] = (),
                       numeric: tuple[str, ...] = ()) -> tuple[pa.Table, int]:
    """Read only ``columns`` (canonical name -> header) with pyarrow; count skipped rows.

    Fields named in ``dictionary`` come back as pandas categoricals, those in ``numeric``
    as float64 (parsed by Arrow; a bad value makes the caller retry as text to name the
    row), the rest as strings. The header is the one ``read_header`` parsed (names
    stripped), so both agree on what each column is called; a header naming a wanted
    column twice is refused.
    """
    header = read_header(path)
    check_unique(path, header, columns.values())
    size = require_file(path)
    convert = _convert_options(columns, dictionary, numeric)
    skipper = _RowSkipper()
    parse = pacsv.ParseOptions(invalid_row_handler=skipper)
    table = _read_table(path, size, header, parse, convert, skipper.rows)
    bad_rows = skipper.rows
    if bad_rows and _is_truncated(path, bad_rows[-1]):
        raise InputError(path, "truncated CSV: the last row is cut short")
    # Named in Arrow, before any conversion: a pandas rename copied the frame (~0.3 ms a
    # file). The count is returned, not kept in ``frame.attrs``: pandas deep-copies those
    # into every column and frame derived from it.
    return table.rename_columns(list(columns)), len(bad_rows)


def _convert_options(columns: dict[str, str], dictionary: tuple[str, ...] = (),
                     numeric: tuple[str, ...] = ()) -> pacsv.ConvertOptions:
    types = {name: (pa.dictionary(pa.int32(), pa.string()) if field in dictionary
                    else pa.float64() if field in numeric
                    else pa.string()) for field, name in columns.items()}
    return pacsv.ConvertOptions(include_columns=list(columns.values()), column_types=types,
                                null_values=NULLS, strings_can_be_null=True)


def split_header(path: Path) -> tuple[tuple[str, ...], bytes] | None:
    """A small file's header (the names ``read_header`` gives) and body, for ``joined_tables``.

    The body is what follows the header row, ending in a line break. The header is kept
    for ``read_header``, so the file is opened once. None for a file to be read alone:
    over ``TEXT_TABLE_BYTES``, unusable, without a line break after its header row, or
    whose header row holds a quote or a lone carriage return (Arrow's first row may end
    elsewhere).
    """
    try:
        with open_binary(path) as handle:
            stat = os.fstat(handle.fileno())
            raw = handle.read(TEXT_TABLE_BYTES + 1)
        end = header_end(raw)[0]
        if not 0 < end <= DEFAULT_LIMITS.max_header_bytes or len(raw) > TEXT_TABLE_BYTES \
                or b'"' in raw[:end] or raw.count(b"\r", 0, end) > raw.endswith(b"\r\n", 0, end):
            return None
        header = _parsed_header(raw[:end], path)
    except (InputError, OSError):
        return None
    _remember_header((str(path), stat.st_size, stat.st_mtime_ns), header)
    body = raw[end:]
    return header, body if not body or body.endswith(b"\n") else body + b"\n"


# The marker row around each file's body in a joined text: no profile names an op so.
FILE_END = "<<cann-diff: end of a file>>"


def joined_tables(bodies: list[bytes], path: Path, header: list[str], columns: dict[str, str],
                  numeric: tuple[str, ...] = ()) -> list[pa.Table] | None:
    """The table each file of these bodies gives alone, read by Arrow as one CSV; or None.

    Each table is what ``read_table_counted`` gives its file when no row is skipped. The
    files all have ``header`` (``split_header`` gave it and the bodies); ``path`` is the
    first. Arrow's set-up (0.4-0.5 ms a call) was most of reading a rank's step table,
    and about a tenth of its kernel table. The bodies are read in parts of at most a block
    (``BLOCK_BYTES``), each parsed as one block, as each file alone is (Arrow cuts blocks
    at a line break, even inside quotes). In a part, a row of ``FILE_END`` in the first
    text column (the rest empty) comes before, between and after the bodies, and the
    table is cut at those rows. None, for the files to be read one by one, on any error,
    a skipped row (the wrong number of fields) or a marker row missing or one too many
    (a quote left open in a file swallows the next one; a file naming an op ``FILE_END``
    adds one).
    """
    marked = next((name for field, name in columns.items() if field not in numeric), None)
    if marked is None:
        return None
    fields = [""] * len(header)
    fields[header.index(marked)] = FILE_END
    end_row = (",".join(fields) + "\n").encode()
    try:
        check_unique(path, header, columns.values())
    except InputError:
        return None
    parts: list[list[bytes]] = []
    size = 0
    for body in bodies:  # a new part where this body would take the text past a block
        if not parts or size + len(body) + len(end_row) > BLOCK_BYTES:
            parts.append([])
            size = len(end_row)
        parts[-1].append(body)
        size += len(body) + len(end_row)
    tables: list[pa.Table] = []
    for part in parts:
        read = _joined_part(part, end_row, header, columns, numeric, marked)
        if read is None:
            return None
        tables += read
    return tables


def _joined_part(bodies: list[bytes], end_row: bytes, header: list[str],
                 columns: dict[str, str], numeric: tuple[str, ...],
                 marked: str) -> list[pa.Table] | None:
    # A marker row first, too: Arrow drops a byte-order mark at the very start of a text,
    # where a file read alone keeps one at the start of its body.
    text = end_row + end_row.join(bodies) + end_row
    skipper = _RowSkipper()
    # One block, on this thread: a stack of small ranks is read where other ranks'
    # workers keep the cores busy, and a streaming read on Arrow's pool once took the
    # process down at exit (std::terminate in one of its threads, 1 run in about 24).
    read = pacsv.ReadOptions(block_size=len(text) + 1, column_names=header, use_threads=False)
    try:
        with pacsv.open_csv(pa.BufferReader(text), read_options=read,
                            parse_options=pacsv.ParseOptions(invalid_row_handler=skipper),
                            convert_options=_convert_options(columns, (), numeric)) as reader:
            table = reader.read_all()
    except pa.ArrowException:
        return None
    ends = np.flatnonzero(pc.fill_null(pc.equal(table.column(marked), FILE_END), False)
                          .to_numpy(zero_copy_only=False))
    if skipper.rows or len(ends) != len(bodies) + 1 or ends[0] != 0 \
            or ends[-1] != table.num_rows - 1:
        return None
    table = table.rename_columns(list(columns))
    return [table.slice(int(start), int(stop - start))
            for start, stop in zip(ends[:-1] + 1, ends[1:])]


class _RowSkipper:
    """pyarrow's invalid_row_handler: skip rows of the wrong width, keep their text."""

    def __init__(self):
        self.rows: list[str] = []

    def __call__(self, row) -> str:
        self.rows.append(row.text or "")
        return "skip"


def _quiet_undecodable_rows(unraisable, previous=sys.unraisablehook) -> None:
    """Drop pyarrow's report of a malformed row that is not UTF-8; pass on all else.

    pyarrow decodes such a row before calling the handler, prints the UnicodeDecodeError
    as an "unraisable" traceback, then fails the read, which is reported in one line.
    """
    if isinstance(unraisable.object, _RowSkipper) and \
            isinstance(unraisable.exc_value, UnicodeDecodeError):
        return
    previous(unraisable)


sys.unraisablehook = _quiet_undecodable_rows

# pyarrow's CSV block: 4 MiB parses fastest here (16 MiB took 2× the CPU at 1M rows); a row
# longer than a block is read again with a larger one.
BLOCK_BYTES = 1 << 22
MAX_BLOCK_BYTES = (1 << 31) - 1  # pyarrow keeps the block size in an int32
# A file below this size is parsed on the calling thread: handing a few kB to pyarrow's
# pool and waiting for it costs more than the parse, most of all when every core is busy
# with other ranks' workers.
SERIAL_PARSE_BYTES = 1 << 20


def _read_table(path: Path, size: int, header: list[str], parse, convert,
                bad_rows: list[str]) -> pa.Table:
    """Read the table with pyarrow, with a block as large as the file when one row needs it.

    A valid CSV may hold a field of tens of MB (a long shape list); pyarrow then says a
    row "straddles two block boundaries", which is no fault of the file.
    """
    block = BLOCK_BYTES
    while True:
        read = pacsv.ReadOptions(block_size=block, column_names=header, skip_rows=1,
                                 use_threads=size > SERIAL_PARSE_BYTES)
        try:
            if size > SERIAL_PARSE_BYTES:
                return pacsv.read_csv(path, read_options=read, parse_options=parse,
                                      convert_options=convert)
            # A small file: the streaming reader sets up in less time than read_csv's
            # (a rank's step table 0.27-0.30 against 0.37-0.50 ms of CPU), the same table.
            with pacsv.open_csv(path, read_options=read, parse_options=parse,
                                convert_options=convert) as reader:
                return reader.read_all()
        except pa.ArrowException as exc:
            message = " ".join(str(exc).split())
            if "straddl" in message and block < min(size + 1, MAX_BLOCK_BYTES):
                block = min(max(block * 4, size + 1), MAX_BLOCK_BYTES)
                bad_rows.clear()
                continue
            if isinstance(exc, OSError):
                raise InputError(path, f"cannot read: {brief(message, 200)}") from None
            raise InputError(path, f"truncated or malformed CSV: {brief(message, 200)}") \
                from None
        except OSError as exc:
            raise InputError(path, f"cannot read: {os_problem(exc)}") from None


def _is_truncated(path: Path, last_bad_row: str) -> bool:
    """A malformed row that is the file's unterminated last line means a cut-off file."""
    with open_binary(path) as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - 65536))
        tail = handle.read()
    if tail.endswith(b"\n"):
        return False
    return tail.decode("utf-8", "replace").rsplit("\n", 1)[-1].rstrip("\r") == \
        last_bad_row.rstrip("\r")


def _has_letter_e(column: pa.ChunkedArray) -> bool:
    """Whether the string data of ``column`` holds an ``e`` or ``E`` byte anywhere.

    A chunk's data buffer may hold bytes beyond its rows (a slice): then this says yes
    more often than the rows would, never less.
    """
    for chunk in column.chunks:
        data = chunk.buffers()[2] if chunk.type == pa.string() else None
        if data is None:
            continue
        raw = data.to_pybytes()
        if b"e" in raw or b"E" in raw:
            return True
    return False


class _LazySeries:
    """An Arrow column that becomes a pandas Series once asked for a row or a method."""

    def __init__(self, column: pa.ChunkedArray):
        self._column = column

    def series(self) -> pd.Series:
        return self._column.to_pandas()

    @property
    def iloc(self):
        return self.series().iloc


def unscaled_int64(decimals: pa.ChunkedArray) -> np.ndarray | None:
    """The unscaled integers of a null-free decimal128 column; None when one exceeds int64.

    A decimal(23, 3) of µs holds ns as its unscaled integer: read from the buffers (on a
    little-endian machine, as Arrow keeps them in the machine's order), it spares Arrow's
    multiply by 1,000 and cast to int64.
    """
    parts = []
    for chunk in decimals.chunks:
        # Two little-endian int64 words a value: the low one, then its sign extension when
        # the value fits an int64.
        words = np.frombuffer(chunk.buffers()[1], dtype="<i8")
        words = words[2 * chunk.offset:2 * (chunk.offset + len(chunk))].reshape(-1, 2)
        if (words[:, 1] != words[:, 0] >> 63).any():
            return None
        parts.append(words[:, 0])
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def parse_us_to_ns(values: pd.Series | pa.ChunkedArray, path: Path, column: str) -> np.ndarray:
    r"""Parse µs timestamps written as text (``"1736413971558972.912\\t"``) into int64 ns.

    Text is split at the decimal point so that 16 integer digits plus 3 decimals
    survive, which a float64 would not hold. Scientific notation (``1.69512E+15``) is
    refused: a spreadsheet writes it when it re-saves the file, keeping 6 digits, so
    every start of a run collapses onto a few instants and every overlap is wrong.
    ``values`` may be the Arrow column as read: it becomes a pandas Series only on the
    slow path (a small table's conversion and back cost ~0.3 ms).
    """
    if isinstance(values, pa.ChunkedArray):
        arrow = values if values.type == pa.string() else values.cast(pa.string())
        values = _LazySeries(values)
    else:
        arrow = pa.chunked_array([pa.array(values, type=pa.string())])
    trimmed = pc.utf8_trim_whitespace(arrow)
    # Rows are searched for an exponent only when the column's bytes hold an e at all: the
    # search of a million rows cost a fifth of the table's read.
    scientific = pc.fill_null(pc.match_substring_regex(trimmed, "[eE]"), False) \
        if _has_letter_e(arrow) else None
    if scientific is not None and pc.any(scientific).as_py():
        row = int(np.flatnonzero(scientific.to_numpy(zero_copy_only=False))[0])
        raise InputError(path, f"{column} is in scientific notation "
                               f"({brief(repr(values.iloc[row]), 40)} at row {row + 2}): the "
                               "file looks re-saved by a spreadsheet, which rounds timestamps; "
                               "use the profiler's own export")
    try:  # fast path: exact decimal parsing in Arrow
        decimals = pc.cast(trimmed, pa.decimal128(23, 3))
        if decimals.null_count == 0:
            ns = unscaled_int64(decimals) if sys.byteorder == "little" else \
                pc.cast(pc.multiply(decimals, pa.scalar(1000, pa.decimal128(4, 0))),
                        pa.int64()).to_numpy(zero_copy_only=False)
            if ns is not None:
                return ns
    except pa.ArrowException:
        pass  # odd precision or bad text: the slow path below parses or names the row
    values = values.series() if isinstance(values, _LazySeries) else values
    text = values.astype("string").str.strip()
    # ASCII digits only: \d also takes other scripts' digits, which to_numeric refuses.
    valid = text.str.fullmatch(r"-?[0-9]{1,16}(?:\.[0-9]*)?").fillna(False).to_numpy(bool)
    if valid.all():
        parts = text.str.split(".", n=1, expand=True, regex=False)
        whole = pd.to_numeric(parts[0]).to_numpy(np.int64)
        frac_text = (parts[1].fillna("") if parts.shape[1] > 1
                     else pd.Series("", index=text.index, dtype="string"))
        frac = pd.to_numeric(frac_text.str.pad(3, side="right", fillchar="0")
                             .str.slice(0, 3)).to_numpy(np.int64)
        valid = np.abs(whole) <= MAX_WHOLE_US
        if valid.all():
            # The sign is the text's: "-0.5" has a whole part of 0.
            negative = text.str.startswith("-").to_numpy(bool)
            return whole * 1000 + np.where(negative, -frac, frac)
    row = int(np.flatnonzero(~valid)[0])
    raise SchemaError(path, f"{column} is not a number of µs "
                            f"({brief(repr(values.iloc[row]), 40)})", where=f"row {row + 2}")


def integer_ids(values, path: Path, header: str) -> pd.arrays.IntegerArray:
    """Step or device ids as Int64: text that is no number is <NA>, a fraction refused."""
    if values is None:
        return None
    if getattr(values, "dtype", None) == np.float64:  # parsed by Arrow already
        numbers = np.asarray(values, dtype=np.float64)
    else:
        numbers = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)
    missing = np.isnan(numbers)
    whole = missing | ((numbers == np.round(numbers)) & (np.abs(numbers) < 2.0 ** 53))
    if not whole.all():
        row = int(np.flatnonzero(~whole)[0])
        raise SchemaError(path, f"{header} is not an integer "
                                f"({brief(repr(pd.Series(values).iloc[row]), 40)})",
                          where=f"row {row + 2}")
    return pd.arrays.IntegerArray(np.where(missing, 0, numbers).astype(np.int64), missing)


def _check_starts(frame: pd.DataFrame, path: Path, column: str,
                  bounds: np.ndarray | None = None) -> None:
    """All rows at one instant: the starts lost their precision (re-saved elsewhere).

    ``bounds``: where each file's rows start in a stack of files, and the end (None: one
    file); each file is judged alone, but the error names ``path``: a stack's reader
    (``text_batch``) reads its files alone again to name the right one.
    """
    start = frame["start_ns"].to_numpy()
    bounds = np.array([0, len(start)]) if bounds is None else bounds
    lengths = np.diff(bounds)
    if not (lengths > 2).any():
        return
    same = np.minimum.reduceat(start, bounds[:-1]) == np.maximum.reduceat(start, bounds[:-1])
    if (same & (lengths > 2)).any():
        count = int(lengths[same & (lengths > 2)][0])
        raise InputError(path, f"all {count} rows have the same {column}: the "
                               "timestamps lost their precision (re-saved by a spreadsheet?); "
                               "use the profiler's own export")


def kernel_columns(path: Path, header: tuple[str, ...] | None = None) -> dict[str, str]:
    """The columns a kernel table is read by (canonical field -> header), or refused.

    ``header`` is the file's, when it was read already (``split_header``).
    """
    names = read_header(path) if header is None else list(header)
    picked = _pick(names, KERNEL_HEADERS)
    if "Task Start Time" in names or "Task Duration" in names:
        raise SchemaError(path, "timestamps without a unit (CANN 6.0 ns format) are not supported")
    missing = [KERNEL_HEADERS[f][0] for f in REQUIRED if f not in picked]
    if missing:
        raise SchemaError(path, f"missing column(s) {', '.join(missing)}; header is "
                                f"{brief(','.join(names[:8]), 160)}"
                                f"{',…' if len(names) > 8 else ''}")
    return picked


def kernel_arrow(path: Path, picked: dict[str, str], dictionary: tuple[str, ...] = ()
                 ) -> tuple[pa.Table, int]:
    """The kernel table as Arrow read it and its count of skipped rows; refused when empty."""
    try:
        table, skipped = read_table_counted(path, picked, dictionary, numeric=KERNEL_NUMBERS)
    except InputError:  # a non-numeric value: read as text so the message names the row
        table, skipped = read_table_counted(path, picked, dictionary)
    if not table.num_rows:
        raise InputError(path, "no kernel rows (header only)")
    return table, skipped


def kernel_frame(table: pa.Table, path: Path, picked: dict[str, str],
                 bounds: np.ndarray | None = None) -> pd.DataFrame:
    """Arrow kernel rows → the raw canonical frame, checked; impossible durations kept.

    ``bounds``: the files' row offsets when ``table`` stacks several (``text_batch``);
    an error then names ``path``, the first of them.
    """
    # The starts (and PMU counters) are taken from their Arrow columns and left out of the
    # conversion: a pandas pop of the column copied the frame's blocks (~0.3 ms a small file).
    start_ns = parse_us_to_ns(table.column("start"), path, picked["start"])
    counters = {field: table.column(field) for field in COUNTER_FIELDS if field in picked}
    pipes = pipe_columns(counters, table.num_rows)
    frame = table.drop_columns(["start", *counters]).to_pandas()
    frame["start_ns"] = start_ns
    _check_starts(frame, path, picked["start"], bounds)
    if frame["dur_us"].dtype != np.float64:  # read as text: numbers, else NaN
        frame["dur_us"] = pd.to_numeric(frame["dur_us"], errors="coerce").astype("float64")
    if frame["dur_us"].isna().any():
        row = int(np.flatnonzero(frame["dur_us"].isna().to_numpy())[0])
        raise SchemaError(path, f"{picked['dur_us']} is not a number", where=f"row {row + 2}")
    frame["step"] = integer_ids(frame["step"], path, picked["step"]) \
        if "step" in frame else pd.array([pd.NA] * len(frame), dtype="Int64")
    for field in ("op_type_raw", "core", "input_shapes", "input_dtypes"):
        if field not in frame:
            frame[field] = pd.Categorical([""] * len(frame))
    for field, values in pipes.items():
        frame[field] = values
    return frame


def no_shapes_warning(path: Path) -> str:
    """The warning for a kernel table without shapes: its operators match by type."""
    return (f"{path.name}: no Input Shapes column (Level0 or aic_metrics=None); "
            "operators are matched by type only")


def read_kernel_table(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read kernel_details.csv or op_summary_*.csv into raw canonical columns.

    Returns the frame (``op_name``, ``op_type_raw``, ``core``, ``start_ns``, ``dur_us``,
    ``step``, ``device_id``, ``input_shapes``, ``input_dtypes`` and, where the file records
    them, the raw attribute and pipe columns of ``kernel_attributes``) and warnings.
    """
    picked = kernel_columns(path)
    # A small table's text stays text: its categoricals would be built, checked and then
    # stacked with other ranks' (rank_reduce) only to be derived again.
    dictionary = DICTIONARY_FIELDS if require_file(path) > TEXT_TABLE_BYTES else ()
    table, skipped = kernel_arrow(path, picked, dictionary)
    warnings = []
    if skipped:
        warnings.append(f"{path.name}: {skipped} malformed row(s) (wrong number of fields) "
                        "skipped")
    frame, dropped = drop_impossible_durations(kernel_frame(table, path, picked), path,
                                               picked["dur_us"])
    warnings += dropped
    if "input_shapes" not in picked:
        warnings.append(no_shapes_warning(path))
    return frame, warnings


def _stage_figures(frame: pd.DataFrame) -> None:
    """Every STAGE_FIELDS column as float64 µs, text that is no number NaN, absent all NaN.

    Arrow parses them as it reads (``read_step_trace``); read as text, the present
    columns are parsed by one ``pd.to_numeric`` of them end to end, then cut apart: one
    call per column cost ~0.1 ms each on a rank's few steps.
    """
    present = [field for field in STAGE_FIELDS if field in frame]
    if any(frame[field].dtype != np.float64 for field in present):
        stacked = pd.concat([frame[field] for field in present], ignore_index=True)
        parsed = pd.to_numeric(stacked, errors="coerce").astype("float64").to_numpy()
        for field, values in zip(present, parsed.reshape(len(present), len(frame))):
            frame[field] = values
    for field in STAGE_FIELDS:
        if field not in present:
            frame[field] = np.nan


def numeric_steps(table: pa.Table, path: Path, picked: dict[str, str]) -> pd.DataFrame:
    """The step figures Arrow parsed, as ``_stage_figures`` and ``integer_ids`` make them.

    Built as one frame from the columns: on a rank's few steps, a column set at a time
    cost ~0.1 ms each.
    """
    rows = table.num_rows
    columns: dict[str, Any] = {}
    for field, column in zip(table.column_names, table.columns):
        if field == "step":
            # As text, so that a bad id is quoted as written (2**53 + 1 holds in no float).
            columns[field] = integer_ids(column.to_pandas(), path, picked["step"])
        elif field in STAGE_FIELDS:
            columns[field] = column.to_numpy()
        else:
            columns[field] = column.to_pandas()
    for field in STAGE_FIELDS:
        columns.setdefault(field, np.full(rows, np.nan))
    if "step" not in columns:
        columns["step"] = pd.array([pd.NA] * rows, dtype="Int64")
    return pd.DataFrame(columns)


def step_columns(path: Path, header: tuple[str, ...] | None = None) -> dict[str, str]:
    """The columns a step table is read by (canonical field -> header), or refused.

    ``header`` is the file's, when it was read already (``split_header``).
    """
    names = read_header(path) if header is None else header
    picked = {field: h for h, field in STEP_HEADERS.items() if h in names}
    missing = [h for h, f in STEP_HEADERS.items() if f in STEP_NEEDED and f not in picked]
    if missing:
        raise SchemaError(path, f"missing column(s) {', '.join(missing)}")
    return picked


def step_arrow(path: Path, picked: dict[str, str]) -> pa.Table:
    """The step table with its figures parsed by Arrow; InputError where one is no number."""
    return read_table_counted(path, picked, numeric=STAGE_FIELDS)[0]


def checked_steps(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Refuse step figures that are no number, infinite or negative lengths of time."""
    if any(np.isnan(frame[field].to_numpy(np.float64)).any() for field in STEP_NEEDED):
        raise SchemaError(path, "non-numeric step figures")
    check_step_figures(frame, path, {f: h for h, f in STEP_HEADERS.items()})
    return frame


def read_step_trace(path: Path) -> pd.DataFrame | None:
    """Read step_trace_time.csv (9, 10 or 11 columns) into µs figures per step.

    Returns None for a file with a header but no step rows.

    Returns columns ``step``, ``device_id`` (when present) and ``STAGE_FIELDS``;
    figures the file lacks (``preparing`` in old files) are NaN.
    """
    picked = step_columns(path)
    try:  # Arrow parses the figures; a value that is no number is read again as text
        frame = numeric_steps(step_arrow(path, picked), path, picked)
    except InputError:
        frame = read_csv_columns(path, picked)
        if not frame.empty:
            _stage_figures(frame)
            frame["step"] = integer_ids(frame["step"], path, picked["step"]) \
                if "step" in frame else pd.array([pd.NA] * len(frame), dtype="Int64")
    if frame.empty:
        return None
    return checked_steps(frame, path)
