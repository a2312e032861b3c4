"""Safe writing of reports: atomic (temp file, then rename), never inside an input."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputError


def check_output_dir(out_dir: Path, inputs: list[Path], create: bool = True) -> Path:
    """Refuse an output directory inside (or equal to) an input directory; create it.

    For a file input (a .db or trace file) only the file itself is protected.
    """
    out = Path(out_dir).resolve()
    for source in inputs:
        src = Path(source).resolve()
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


def safe_name(label: str) -> str:
    """A label as one path component: no separators, no leading dots."""
    name = re.sub(r"[^A-Za-z0-9._+-]+", "_", label).lstrip(".")
    return name or "run"


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temp_path)`` then rename onto ``path``; a failed write leaves no trace."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "is a directory; cannot write the report there")
    try:
        handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
    """Write UTF-8 text atomically."""
    return write_atomic(path, lambda temp: temp.write_text(text, encoding="utf-8"))
