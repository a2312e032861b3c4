"""Safe writing of reports: atomic (temp file, then rename), never inside an input."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import OutputError


def check_output_dir(out_dir: Path, inputs: list[Path]) -> Path:
    """Refuse an output directory inside (or equal to) an input directory; create it."""
    out = Path(out_dir).resolve()
    for source in inputs:
        src = Path(source).resolve()
        root = src if src.is_dir() else src.parent
        if out == root or root in out.parents:
            raise OutputError(out_dir, f"output directory lies inside input {source}; "
                                       "choose another with -o")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out_dir, f"cannot create output directory: {exc.strerror}") from None
    return out


def write_atomic(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temp_path)`` then rename onto ``path``; a failed write leaves no trace."""
    path = Path(path)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(handle)
    try:
        write(Path(temp))
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """Write UTF-8 text atomically."""
    return write_atomic(path, lambda temp: temp.write_text(text, encoding="utf-8"))
