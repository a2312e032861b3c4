"""Safe writing of reports: as one unit, atomic per file, never inside an input.

A report is several files (report.md links its PNGs; report.json and ranks.csv go with
it). ``staged_report`` writes them all into a stage directory first and then moves each
into place, under an exclusive lock on the output directory, so that two runs writing to
one ``-o`` never mix their files and an interrupted run leaves the last whole report.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ..errors import InputError, OutputError, UsageError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None


LOCK_NAME = ".cann-diff.lock"
STAGE_PREFIX = ".cann-diff-stage-"
# A writer holds the lock only while it renders and moves the report (seconds; a few tens
# for a large cluster's charts), never while it reads the profiles. Much longer than that
# is a stuck writer, and a CI job should fail rather than hang.
LOCK_WAIT_S = 120.0
LOCK_POLL_S = 0.1
# Moved last, in this order: once report.md is the new one, every file it links is too.
COMMIT_LAST = ("report.json", "report.md")
# The stage's folder for the files a commit replaces, until every move is done.
UNDO_NAME = ".cann-diff-undo"
# Files a report writes into its directory (besides its ``*.png`` charts).
REPORT_FILES = ("report.md", "report.html", "report.json", "ranks.csv")
# A name longer than the filesystem allows is cut to it, with this many hex digits of the
# SHA-1 of the whole name after it, so that two long names still differ.
NAME_HASH_DIGITS = 8
NAME_MAX_FALLBACK = 255  # bytes: ext4, XFS, btrfs, tmpfs, NTFS (in UTF-16 units)
# A temporary file's name holds at most this much of its target's name (mkstemp adds 8
# random characters and the suffix): a target near the limit still gets one.
TEMP_NAME_KEEP = 64
# Text is UTF-8. A lone surrogate (a byte of a file name or argument that was not UTF-8,
# as Python's surrogateescape decodes it) cannot be encoded: written as U+FFFD instead of
# failing the run. Renderers show such a byte as ``\xff`` (``format.visible``); this is
# the net for text that reaches a file unescaped (report.json keeps text as read).
UNDECODABLE = "cann-diff-undecodable"


def _replacement_bytes(error: UnicodeError) -> tuple[bytes, int]:
    """U+FFFD in UTF-8 for each character that cannot be encoded.

    Bytes, not text: the UTF-8 encoder takes no replacement text but ASCII.
    """
    if not isinstance(error, UnicodeEncodeError) or error.encoding.replace("-", "").lower() \
            != "utf8":
        raise error
    return "\ufffd".encode() * (error.end - error.start), error.end


codecs.register_error(UNDECODABLE, _replacement_bytes)


def resolved(path: Path, kind: type[InputError] | type[OutputError] = InputError) -> Path:
    """``path`` with every symlink resolved; a symlink loop is ``kind`` naming the path.

    Python before 3.13 raises RuntimeError("Symlink loop") from ``Path.resolve``; 3.13
    resolves as far as it can. Both are refused here with one line (exit 2).
    """
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise kind(path, "is a symlink loop (a link that leads back to itself)") from None
    try:
        return Path(path).resolve()
    except RuntimeError:  # a loop in a part not yet made (pathlib before 3.13)
        raise kind(path, "is a symlink loop (a link that leads back to itself)") from None


def check_inputs(inputs: list[Path]) -> None:
    """Refuse an input that is a symlink loop (exit 2, one line) before anything is read."""
    for source in inputs:
        resolved(source, InputError)


def check_output_dir(out_dir: Path, inputs: list[Path], create: bool = True) -> Path:
    """Refuse an output directory inside (or equal to) an input directory; create it.

    For a file input (a .db or trace file) only the file itself is protected.
    """
    out = resolved(out_dir, OutputError)
    for source in inputs:
        src = resolved(source, InputError)
        if src.is_dir() and (out == src or src in out.parents):
            raise OutputError(out_dir, f"output directory lies inside input {source}; "
                                       "choose another with -o")
        if src.is_file() and out == src:
            raise OutputError(out_dir, f"output directory is the input file {source}")
    if out.exists() and not out.is_dir():
        raise OutputError(out_dir, "exists and is not a directory")
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(out_dir, f"cannot create output directory: "
                                       f"{exc.strerror or exc}") from None
    return out


def check_junit(junit: Path, out_dir: Path | None, inputs: list[Path]) -> None:
    """Refuse a ``--junit`` FILE that would break a promise of the report (UsageError).

    Checked before anything is read or written (again once a default OUT is known): the
    file may not lie inside an input (symlinks resolved) or be an input file, be OUT or
    hold it, be a directory, or take the name of a report file (``REPORT_FILES``, a
    ``*.png`` chart, the lock) in OUT or a folder below it; its folder must exist (or be
    OUT, created with the report) and be writable. Its directory entry is what is
    replaced: a symlink FILE is replaced itself, a symlinked folder is followed.
    """
    def refuse(problem: str) -> UsageError:
        return UsageError("--junit", f"{junit}: {problem}")

    try:
        folder = resolved(Path(junit).parent, OutputError)
        written = folder / Path(junit).name
        out = resolved(out_dir, OutputError) if out_dir is not None else None
        sources = [(source, resolved(source, InputError)) for source in inputs]
    except (InputError, OutputError) as exc:
        raise UsageError("--junit", str(exc)) from None
    if out is not None and (written == out or written in out.parents):
        raise refuse("is the output directory or holds it; give a file name beside it")
    if written.is_dir():
        raise refuse("is a directory; give a file name")
    for source, src in sources:
        if written == src or src.is_dir() and src in written.parents:
            raise refuse(f"lies inside input {source}; nothing is written into an input"
                         if written != src else f"is the input file {source}")
    if out is not None and out in written.parents and _report_file(written.name):
        raise refuse(f"{written.name} is a file the report writes; choose another name")
    if not folder.is_dir() and folder != out:
        raise refuse(f"folder {Path(junit).parent} does not exist")
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise refuse(f"folder {Path(junit).parent} is not writable")


def _report_file(name: str) -> bool:
    """A name the report (or its writer) takes in its directories."""
    return (name in REPORT_FILES or name.lower().endswith(".png") or name == LOCK_NAME
            or name.startswith(STAGE_PREFIX))


def safe_name(label: str) -> str:
    """A label as one path component: no separators, no leading dots, no ``_`` at the ends.

    ``cann8.0.RC2 (new1)`` gives ``cann8.0.RC2_new1``, not a name ending in ``_``.
    """
    name = re.sub(r"[^A-Za-z0-9._+-]+", "_", label).lstrip(".").strip("_")
    return name or "run"


def name_max(directory: Path) -> int:
    """The longest file name, in bytes, the filesystem of ``directory`` takes.

    Asked of the nearest directory that exists (the output directory may not yet);
    ``NAME_MAX_FALLBACK`` where the system cannot say.
    """
    place = Path(os.path.abspath(directory))
    while not place.is_dir() and place != place.parent:
        place = place.parent
    try:
        return int(os.pathconf(place, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError, TypeError):  # no pathconf, or no answer
        return NAME_MAX_FALLBACK


def fit_name(name: str, directory: Path) -> str:
    """``name`` as a file name ``directory`` can hold: cut to its limit, hashed when cut.

    The limit counts bytes of the filesystem encoding. A cut name ends in ``_`` and
    ``NAME_HASH_DIGITS`` hex digits of the SHA-1 of the whole name, so that names that
    differ only past the cut stay apart. The report still shows each label whole.
    """
    limit = name_max(directory)
    encoded = os.fsencode(name)
    if len(encoded) <= limit:
        return name
    import hashlib  # here: 3 ms the command's start (and --help) need not pay

    digest = hashlib.sha1(encoded).hexdigest()[:NAME_HASH_DIGITS]
    kept = encoded[:max(1, limit - NAME_HASH_DIGITS - 1)]
    # A character the cut split in two is dropped: the name stays valid text.
    head = kept.decode(sys.getfilesystemencoding(), errors="ignore").rstrip("_")
    return f"{head}_{digest}"


def unique_names(names: list[str]) -> list[str]:
    """``names`` made unique in order: a repeated name gets ``_2``, ``_3``, … (stable).

    Compared case-folded, so that two names never share a directory on a case-insensitive
    filesystem either.
    """
    taken: set[str] = set()
    unique = []
    for name in names:
        chosen, number = name, 1
        while chosen.casefold() in taken:
            number += 1
            chosen = f"{name}_{number}"
        taken.add(chosen.casefold())
        unique.append(chosen)
    return unique


def write_atomic(path: Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(temp_path)`` then rename onto ``path``; a failed write leaves no trace."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "is a directory; cannot write the report there")
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name[:TEMP_NAME_KEEP]}.", suffix=".tmp",
                                        dir=path.parent)
        os.close(handle)
    except OSError as exc:
        raise OutputError(path.parent, f"cannot write: {exc.strerror or exc}") from None
    try:
        write(Path(temp))
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp creates 0600; reports are for sharing
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise OutputError(path, f"cannot write: {exc.strerror or exc}") from None
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> Path:
    """Write UTF-8 text atomically; a byte that was not UTF-8 becomes U+FFFD (``UNDECODABLE``)."""
    return write_atomic(path, lambda temp: temp.write_text(text, encoding="utf-8",
                                                           errors=UNDECODABLE))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write bytes atomically."""
    return write_atomic(path, lambda temp: temp.write_bytes(data))


def write_images(out_dir: Path, images: Mapping[str, bytes]) -> dict[str, Path]:
    """Each chart's PNG bytes as ``<name>.png`` in ``out_dir``; {chart name: path}."""
    return {name: write_bytes_atomic(Path(out_dir) / f"{name}.png", data)
            for name, data in images.items()}


def write_summary(out_dir: Path, blocks: list, images: Mapping[str, bytes], data: dict,
                  html: bool = True) -> list[Path]:
    """A summary of several reports (candidates, a ladder) as its files in ``out_dir``.

    Its charts (``images``: {name: PNG bytes}), report.md linking them, report.html
    holding them, and report.json (``data``).
    """
    import json

    from .html import to_html
    from .markdown import to_markdown

    drawn = write_images(out_dir, images)
    written = list(drawn.values())
    written.append(write_text_atomic(Path(out_dir) / "report.md", to_markdown(
        blocks, {name: path.name for name, path in drawn.items()})))
    if html:
        written.append(write_text_atomic(Path(out_dir) / "report.html",
                                         to_html(blocks, images)))
    written.append(write_text_atomic(Path(out_dir) / "report.json",
                                     json.dumps(data, indent=2, ensure_ascii=False) + "\n"))
    return written


@contextmanager
def staged_report(out_dir: Path, wait_s: float | None = None,
                  on_wait: Callable[[], None] | None = None,
                  beside: Mapping[Path, str] | None = None) -> Iterator[Path]:
    """Lock ``out_dir``, yield an empty stage directory, then move its files into ``out_dir``.

    Write every file of the report into the yielded directory. When the block ends
    normally, each file replaces its namesake in ``out_dir`` (``os.replace``; other files
    there stay); when it raises (an error, Ctrl-C, SIGTERM), the stage is removed and
    ``out_dir`` is left as it was. A second writer waits for the lock up to ``wait_s``
    seconds (default ``LOCK_WAIT_S``), calling ``on_wait()`` once, then fails with
    OutputError. The stage lies inside ``out_dir`` (hidden): on its filesystem, so the
    moves are renames, and writable whenever ``out_dir`` is, even if its parent is not.

    ``beside`` ({path: text}, the ``--junit`` file) is written in the same unit: into the
    stage when its folder is ``out_dir``, else into a hidden file in its own folder (a
    rename there too). A file that cannot be written fails the block before any move;
    its move comes first and is undone with the others.
    """
    out = Path(out_dir)
    with _locked(out, LOCK_WAIT_S if wait_s is None else wait_s, on_wait) as held:
        if held:  # else a stage there may be a live writer's
            _remove_stale_stages(out)
        try:
            stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=out))
        except OSError as exc:
            raise OutputError(out, f"cannot write: {exc.strerror or exc}") from None
        outside: list[tuple[Path, Path]] = []
        try:
            yield stage
            _stage_beside(stage, out, beside or {}, outside)
            with _signals_held():  # a Ctrl-C now would leave half the files moved
                _commit(stage, out, outside)
        finally:
            with _signals_held():  # nor may a second Ctrl-C cut the clean-up short
                for temp, _target in outside:
                    temp.unlink(missing_ok=True)
                    _kept_beside(temp).unlink(missing_ok=True)
                shutil.rmtree(stage, ignore_errors=True)


def _stage_beside(stage: Path, out: Path, files: Mapping[Path, str],
                  outside: list[tuple[Path, Path]]) -> None:
    """Write each of ``files`` where its move will be a rename; list (temp, target) moves.

    ``outside`` is filled as each temporary file is made, so that the caller removes them
    all whatever fails.
    """
    for target, text in files.items():
        target = Path(target)
        if resolved(target.parent, OutputError) == out.resolve():
            write_text_atomic(stage / target.name, text)
            continue
        try:
            handle, temp = tempfile.mkstemp(prefix=f".{target.name[:TEMP_NAME_KEEP]}.",
                                            suffix=".tmp", dir=target.parent)
            outside.append((Path(temp), target))
            with os.fdopen(handle, "w", encoding="utf-8", errors=UNDECODABLE) as stream:
                stream.write(text)
            os.chmod(temp, 0o666 & ~_umask())
        except OSError as exc:
            raise OutputError(target, f"cannot write: {exc.strerror or exc}") from None


def _kept_beside(temp: Path) -> Path:
    """Where a file outside ``out`` is kept while its successor ``temp`` moves in."""
    return temp.with_name(temp.name + ".old")


@contextmanager
def _locked(out: Path, wait_s: float, on_wait: Callable[[], None] | None) -> Iterator[bool]:
    """Hold an exclusive flock on the directory ``out`` itself; yield whether it is held.

    Locking the directory (as ``flock(1) DIR`` does) leaves no lock file among the user's
    files, and a reader may take a shared lock the same way to see one whole report. Where
    the filesystem cannot lock a directory (NFS emulates flock with byte-range locks, which
    need a file open for writing) a hidden ``.cann-diff.lock`` beside the report is locked.
    """
    if fcntl is None:  # not POSIX: no lock, the staged move alone keeps each file whole
        yield False
        return
    try:
        handles = [os.open(out, os.O_RDONLY | os.O_DIRECTORY)]
    except OSError as exc:
        raise OutputError(out, f"cannot write: {exc.strerror or exc}") from None
    try:
        held = _acquire(handles[0], out, wait_s, on_wait)
        if not held:
            handles.append(_open_lock_file(out))
            held = _acquire(handles[1], out, wait_s, on_wait)
        yield held
    finally:
        for handle in handles:
            os.close(handle)  # releases the lock


def _open_lock_file(out: Path) -> int:
    lock_path = out / LOCK_NAME
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        try:  # another user's lock file: flock needs no write access
            return os.open(lock_path, os.O_RDONLY)
        except OSError:
            raise OutputError(out, f"cannot write: {exc.strerror or exc}") from None


def _acquire(handle: int, out: Path, wait_s: float,
             on_wait: Callable[[], None] | None) -> bool:
    """Lock ``handle`` exclusively, waiting up to ``wait_s``; False if it cannot be locked."""
    assert fcntl is not None  # _locked asks only on POSIX
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False  # ENOLCK, EBADF, EOPNOTSUPP: this filesystem cannot lock it
        if time.monotonic() >= deadline:
            raise OutputError(out, f"another cann-diff has been writing a report here for "
                                   f"{wait_s:g} s; wait for it to finish or choose another "
                                   f"directory with -o")
        if on_wait is not None:
            on_wait()
            on_wait = None
        time.sleep(LOCK_POLL_S)


def _remove_stale_stages(out: Path) -> None:
    """Remove stages of writers killed outright (SIGKILL): we hold the lock, none is live."""
    for stale in out.glob(f"{STAGE_PREFIX}*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)


def _commit(stage: Path, out: Path, outside: list[tuple[Path, Path]] | None = None) -> None:
    """Move every file of ``stage`` onto its namesake in ``out`` as one unit, report.md last.

    Every target is checked before the first file moves (``_plan``). Subdirectories (the
    pairwise reports of several candidates) are moved first, so that the summary's
    report.md appears only once everything it links is in place. Each file a move replaces
    is kept in the stage until all moves are done; should a move still fail (a full disk,
    an I/O error), the moves already made are undone and ``out`` is left as it was.
    ``outside``: (temporary file, target) moves beside ``out``, made first; a file they
    replace is kept beside its target (``_kept_beside``), on its filesystem.
    """
    moves: list[tuple[Path, Path]] = list(outside or [])
    for _temp, target in moves:
        if target.is_dir():
            raise OutputError(target, "is a directory; cannot write there")
    folders: list[Path] = []
    _plan(stage, out, moves, folders)
    undo = stage / UNDO_NAME  # planned first: never among the moves
    try:
        undo.mkdir()
    except OSError as exc:
        raise OutputError(out, f"cannot write: {exc.strerror or exc}") from None
    done: list[tuple[Path, Path | None]] = []
    made: list[Path] = []
    target = out
    try:
        for target in folders:
            target.mkdir()
            made.append(target)
        for number, (source, target) in enumerate(moves):
            kept = None
            if os.path.lexists(target):
                kept = _kept_beside(source) if number < len(outside or []) else \
                    undo / str(number)
            if kept is not None:
                _keep(target, kept)
            try:
                os.replace(source, target)
            except OSError:
                if kept is not None and not os.path.lexists(target):
                    os.replace(kept, target)  # moved aside by _keep: put it back
                raise
            done.append((target, kept))
    except OSError as exc:
        _undo(done, made)
        raise OutputError(target, f"cannot write: {exc.strerror or exc}") from None


def _plan(stage: Path, out: Path, moves: list[tuple[Path, Path]], folders: list[Path]) -> None:
    """List the moves from ``stage`` to ``out`` and the folders to create; nothing moves yet.

    Refuses (OutputError) any target that cannot take its file: a directory where a file
    goes, a file where a directory goes, a directory that cannot be written.
    """
    entries = sorted(stage.iterdir())
    subdirs = [p for p in entries if p.is_dir() and not p.is_symlink()]
    names = [p.name for p in entries if p not in subdirs]
    names = [n for n in names if n not in COMMIT_LAST] + [n for n in COMMIT_LAST if n in names]
    if out.is_dir() and not os.access(out, os.W_OK | os.X_OK):
        raise OutputError(out, "cannot write: permission denied")
    for sub in subdirs:
        target = out / sub.name
        if os.path.lexists(target) and not target.is_dir():
            raise OutputError(target, "exists and is not a directory")
        if not target.exists():
            folders.append(target)
        _plan(sub, target, moves, folders)
    for name in names:
        if (out / name).is_dir():
            raise OutputError(out / name, "is a directory; cannot write the report there")
        moves.append((stage / name, out / name))


def _keep(target: Path, kept: Path) -> None:
    """Keep the file ``target`` as ``kept`` (in the stage) while its successor moves in.

    A hard link keeps it without ever leaving ``target`` missing; where the filesystem or
    ``protected_hardlinks`` refuses one, the file is moved aside instead.
    """
    try:
        os.link(target, kept, follow_symlinks=False)
    except OSError:
        os.replace(target, kept)


def _undo(done: list[tuple[Path, Path | None]], made: list[Path]) -> None:
    """Put back every replaced file and remove every new file and folder, newest first."""
    for target, kept in reversed(done):
        try:
            if kept is not None:
                os.replace(kept, target)
            else:
                os.unlink(target)
        except OSError:
            continue  # nothing better to do: the other files are still put back
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            continue


@contextmanager
def _signals_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM over a short critical section (main thread only).

    The handlers are swapped for ones that only remember the signal, and the remembered
    signal is raised again afterwards. Masking with ``pthread_sigmask`` would not do: it
    masks the main thread alone, pyarrow's reader threads then take the process-directed
    signal, and Python still runs its handler at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    # A signal the process ignores (SIGINT in a background job) stays ignored.
    previous = {number: signal.signal(number, lambda number, _frame: caught.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(number) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if caught:
            signal.raise_signal(caught[0])
