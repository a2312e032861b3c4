"""Open only regular files, bound what is read, and say in one line why a path is unusable.

Every reader finds its files by name (a glob, a fixed name), and a name says nothing of
what is behind it: a FIFO named ``profiler_info_0.json`` blocks ``open()`` forever, a
directory named ``kernel_details.csv`` or a symbolic-link loop makes the file silently
"absent", and ``Path.is_file()`` raises on ``EACCES``/``ENAMETOOLONG``. So readers ask
here: discovery answers yes/no for what is plainly absent and raises ``InputError`` for
what is there but unusable; opening checks that the entry is a regular file, with a
non-blocking open and ``fstat`` so that a FIFO swapped in after the check cannot block.

JSON nesting is bounded here too (``DepthGuard``): Python's parser recurses once per
level and ijson's memory grows with the square of the depth, so a 78 KiB file of
brackets would need gigabytes. The guard counts brackets outside strings on the raw
bytes, vectorized with numpy, before any parser sees them.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

import numpy as np

from ...errors import InputError
from ...settings import DEFAULT_LIMITS

# Absent, not broken: the name is simply not there (or a parent is not a directory).
_ABSENT = (errno.ENOENT, errno.ENOTDIR)
_PROBLEMS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ELOOP: "too many levels of symbolic links (a link loop?)",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory, not a file",
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.EIO: "input/output error (a failing disk or network share?)",
}
# Folders that hold a rank's exported files: a warning names the rank directory above.
_EXPORT_DIRS = {"ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output", "summary", "timeline"}


def os_problem(exc: OSError) -> str:
    """One short line for an OSError, without the path (the caller names it)."""
    if exc.errno in _PROBLEMS:
        return _PROBLEMS[exc.errno]
    text = exc.strerror or str(exc) or type(exc).__name__
    return " ".join(text.split()).lower()


def kind_of(mode: int) -> str:
    """What a non-regular entry is, for a message (``a directory``, ``a FIFO`` …)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _stat(path: Path, follow: bool = True) -> os.stat_result | None:
    """``os.stat`` that returns None for an absent path and raises InputError otherwise."""
    try:
        return os.stat(path, follow_symlinks=follow)
    except OSError as exc:
        if exc.errno in _ABSENT:
            return None
        raise InputError(path, f"cannot read: {os_problem(exc)}") from None
    except ValueError:  # an embedded NUL byte
        raise InputError(path, "cannot read: the path holds a NUL byte") from None


def present(path: Path) -> bool:
    """True when an entry of that name exists, of any kind (a dangling link included)."""
    return _stat(path, follow=False) is not None


def is_regular(path: Path) -> bool:
    """True for a regular file (links followed); False when absent or of another kind.

    Unlike ``Path.is_file()`` it never raises a bare OSError: an entry that is there but
    cannot be examined (``EACCES``, a link loop, a name too long) is an InputError.
    """
    found = _stat(path)
    if found is None and present(path):
        raise InputError(path, "cannot read: a broken symbolic link")
    return found is not None and stat.S_ISREG(found.st_mode)


def is_directory(path: Path) -> bool:
    """True for a directory (links followed); unusable entries raise InputError."""
    found = _stat(path)
    return found is not None and stat.S_ISDIR(found.st_mode)


def require_file(path: Path) -> int:
    """Size in bytes of a regular file; InputError naming the path for anything else."""
    found = _stat(path)
    if found is None:
        if present(path):
            raise InputError(path, "cannot read: a broken symbolic link")
        raise InputError(path, "no such file")
    if not stat.S_ISREG(found.st_mode):
        raise InputError(path, f"is {kind_of(found.st_mode)}, not a regular file")
    return found.st_size


def _nonblocking(name: str, flags: int) -> int:
    """Opener that never waits for a FIFO's writer (no effect on regular files)."""
    return os.open(name, flags | getattr(os, "O_NONBLOCK", 0))


def open_binary(path: Path) -> io.BufferedReader:
    """Open a regular file for reading; InputError (one line) for anything else."""
    require_file(path)
    try:
        handle = open(path, "rb", opener=_nonblocking)
    except OSError as exc:
        raise InputError(path, f"cannot read: {os_problem(exc)}") from None
    mode = os.fstat(handle.fileno()).st_mode
    if not stat.S_ISREG(mode):  # swapped for a FIFO or a directory after the check
        handle.close()
        raise InputError(path, f"is {kind_of(mode)}, not a regular file")
    return handle


def read_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most ``limit`` when given); InputError on failure."""
    with open_binary(path) as handle:
        try:
            return handle.read(-1 if limit is None else limit)
        except OSError as exc:
            raise InputError(path, f"cannot read: {os_problem(exc)}") from None


def list_dir(path: Path) -> list[Path]:
    """Entries of a directory, sorted; InputError when it cannot be listed.

    Sorted by name (the order of the paths themselves, for one directory's entries): an
    input of thousands of ranks is listed once per format probe, and names compare
    several times faster than paths.
    """
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise InputError(path, f"cannot list the directory: {os_problem(exc)}") from None
    return [path / name for name in names]


def names_in(folder: Path) -> list[str]:
    """The names in a directory, sorted; none when it cannot be listed (as a glob sees it)."""
    try:
        return sorted(os.listdir(folder))
    except (OSError, ValueError):
        return []


def size_text(count: int) -> str:
    """A byte count for a message: ``1 MiB``, ``64 KiB``, ``512 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:g} {unit}"
    return f"{count} bytes"


# Control characters (line breaks included) shown escaped: an error is one line.
_ESCAPES = {code: f"\\x{code:02x}" for code in [*range(32), 127]}


def brief(value, width: int = 60) -> str:
    """A value from an input for a message: one line, its repr for non-text, cut to ``width``.

    Keys and cells of a hostile file may be megabytes long or hold line breaks; a message
    quotes an escaped prefix.
    """
    text = (value if isinstance(value, str) else repr(value)).translate(_ESCAPES)
    return text if len(text) <= width else text[:width - 1] + "…"


def shown(path: Path) -> str:
    """The file's name with its rank directory (``rank0_ascend_pt/kernel_details.csv``).

    Warnings go into one report for every rank, so a bare file name would not say which
    rank's file it was.
    """
    folder = path.parent
    if folder.name in _EXPORT_DIRS:
        folder = folder.parent
    if folder.name in _EXPORT_DIRS:  # device_0/summary, device_0/timeline
        folder = folder.parent
    return f"{folder.name}/{path.name}" if folder.name else path.name


# --------------------------------------------------------------------------- JSON depth

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1
_BRACKET = _STEP != 0
SCAN_BLOCK = 1 << 20  # bytes scanned per numpy pass: bounds the guard's own memory
# Every byte but quotes and brackets: without a backslash, the nesting depends on those alone.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


class DepthGuard:
    """Refuse JSON nested deeper than a limit, fed the raw bytes block by block.

    Counts ``[``/``{`` minus ``]``/``}`` outside strings; a quote preceded by an odd
    run of backslashes is escaped (runs may straddle two blocks). Invalid JSON may
    mislead the count past its first error, but a parser stops at that error anyway.
    """

    def __init__(self, path: Path, limit: int | None = None):
        self.path = path
        self.limit = DEFAULT_LIMITS.max_json_depth if limit is None else limit
        self.depth = 0
        self.in_string = False
        self.backslashes = 0  # length of the backslash run that ended the last block

    def feed(self, data: bytes) -> None:
        """Scan the next bytes; InputError once the nesting passes the limit."""
        if not self.backslashes and b"\\" not in data:
            # No escapes: only quotes and brackets matter, in their order. Dropping the
            # rest first (one C pass) leaves numpy a tenth of the bytes of a profile JSON.
            data = data.translate(None, _NOT_STRUCTURE)
        for begin in range(0, len(data), SCAN_BLOCK):
            part = data[begin:begin + SCAN_BLOCK]  # the same object when data is one block
            self._scan(np.frombuffer(part, dtype=np.uint8), b"\\" in part)

    def _escaped(self, block: np.ndarray, quotes: np.ndarray) -> np.ndarray:
        """For each quote position, whether an odd run of backslashes precedes it."""
        slashes = np.flatnonzero(block == _BACKSLASH)
        carry = self.backslashes
        if len(slashes) == 0:
            self.backslashes = 0
            return (quotes == 0) & (carry % 2 == 1)
        breaks = np.flatnonzero(np.diff(slashes) != 1)
        starts = slashes[np.r_[0, breaks + 1]]
        ends = slashes[np.r_[breaks, len(slashes) - 1]]
        lengths = ends - starts + 1 + np.where(starts == 0, carry, 0)
        self.backslashes = int(lengths[-1]) if ends[-1] == len(block) - 1 else 0
        if len(quotes) == 0:
            return np.zeros(0, dtype=bool)
        at = np.clip(np.searchsorted(ends, quotes - 1), 0, len(ends) - 1)
        after_run = ends[at] == quotes - 1
        odd = after_run & (lengths[at] % 2 == 1)
        return odd | ((quotes == 0) & (carry % 2 == 1) & ~after_run)

    def _scan(self, block: np.ndarray, has_backslash: bool) -> None:
        quotes = np.flatnonzero(block == _QUOTE)
        if has_backslash or self.backslashes:
            quotes = quotes[~self._escaped(block, quotes)]
        brackets = np.flatnonzero(_BRACKET[block])
        # A bracket is inside a string when an odd number of real quotes precede it.
        before = np.searchsorted(quotes, brackets) + self.in_string
        steps = np.where(before % 2 == 1, 0, _STEP[block[brackets]]).astype(np.int32)
        depth = self.depth + np.cumsum(steps, dtype=np.int64)
        if len(depth) and int(depth.max()) > self.limit:
            raise InputError(self.path, _too_deep(self.limit))
        if len(depth):
            self.depth = int(depth[-1])
        self.in_string = bool((len(quotes) + self.in_string) % 2)


def _too_deep(limit: int) -> str:
    return f"JSON nested deeper than {limit} levels (no profiler writes that; a hostile or " \
           "broken file?)"


def json_problem(exc: Exception) -> str:
    """The first line of a json/ijson error, without yajl's ``parse error:`` prefix.

    yajl's messages span three lines (the text and a ``(right here) ---^`` pointer),
    and the lexical ones arrive as the repr of bytes (``b'lexical error: …'``).
    """
    text = str(exc).strip()
    if text[:2] in ("b'", 'b"'):
        text = text[2:].replace("\\n", "\n")
    first = text.splitlines()[0].strip() if text else type(exc).__name__
    for prefix in ("parse error: ", "lexical error: "):
        first = first.removeprefix(prefix)
    return first.rstrip(".") or type(exc).__name__


def check_depth(path: Path, data: bytes, limit: int | None = None) -> None:
    """Refuse ``data`` (the whole text of ``path``) when it nests deeper than the limit.

    A text of at most a block without a backslash, where a string is simply one quote
    to the next, has its strings cut out first (a split at the quotes); its depth is then
    the running count of the brackets left. On a rank's 4.5 KB communication.json this
    took 22 µs (profiler_info 13), where the guard's pass, built for megabytes, took 44
    (36).
    """
    limit = DEFAULT_LIMITS.max_json_depth if limit is None else limit
    if len(data) > SCAN_BLOCK or b"\\" in data or limit < 0:
        DepthGuard(path, limit).feed(data)
        return
    # Every other piece between quotes is inside a string (an unclosed one runs to the end).
    structure = b"".join(data.translate(None, _NOT_STRUCTURE).split(b'"')[::2])
    if not structure:
        return
    depth = int(np.cumsum(_STEP[np.frombuffer(structure, dtype=np.uint8)], dtype=np.int64).max())
    if depth > limit:
        raise InputError(path, _too_deep(limit))
