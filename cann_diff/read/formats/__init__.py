"""Formats: one module per profile layout, each declaring what it reads and how it knows.

A format module offers ``FORMAT`` (its name in report.json), ``LOOKS_FOR`` (what it looks
for, quoted when nothing is found), ``is_rank_dir(path)`` (one rank's result) and
``read_rank(path) -> RankData`` (or a list, for a cluster summary), and may offer
``read_ranks(paths)``, the same for many ranks at once (``torch_text``: small ranks read as
stacks, ``text_batch``). The modules beside them parse what several formats share (CSV,
JSON, traces, dbs, memory files, provenance) and refuse what is not sane; nothing here
derives canonical names or reduces. ``find_rank_sources`` decides the layout of an input
and lists its ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...schema import Note
from ..rank_data import RankData
from . import cluster_output, kernelless, msprof_dirs, sqlite_db, torch_text, trace_json
from .files import is_directory, list_dir, present


@dataclass(frozen=True)
class Format:
    """A profile layout we can read."""

    name: str
    looks_for: str
    is_rank_dir: Callable[[Path], bool]
    read_rank: Callable[[Path], RankData | list[RankData]]
    # ``read_rank`` of several paths in order, faster than one by one (None: not offered).
    read_ranks: Callable[[list[Path]], Iterable[RankData]] | None = None


def _format(module: Any, is_rank_dir: Callable[[Path], bool] | None = None) -> Format:
    """A format module's own declaration: what it reads, how it knows, how it reads."""
    return Format(module.FORMAT, module.LOOKS_FOR, is_rank_dir or module.is_rank_dir,
                  module.read_rank, getattr(module, "read_ranks", None))


# In priority order: the first that accepts a path reads it (a db only with kernels).
FORMATS: list[Format] = [_format(sqlite_db, sqlite_db.holds_kernels),
                         *(_format(m) for m in (torch_text, msprof_dirs, trace_json,
                                                cluster_output))]
# A rank without kernels: asked only once every kernel format has declined a path.
KERNEL_LESS = _format(kernelless)
# The torch_npu layouts, beside whose ranks kernel-less rank directories are looked for (a
# PROF_* or cluster_analysis_output input covers its ranks in its own files).
TORCH_LAYOUTS = (sqlite_db.FORMAT, torch_text.FORMAT, trace_json.FORMAT)


@dataclass(frozen=True)
class RankSource:
    """One rank result to read (a directory or a file) and the format that reads it."""

    path: Path
    format: Format


def _kernel_format(path: Path) -> Format | None:
    return next((fmt for fmt in FORMATS if fmt.is_rank_dir(path)), None)


def _looked_for() -> str:
    return "; ".join(f.looks_for for f in (*FORMATS, KERNEL_LESS))


def find_rank_sources(path: Path) -> tuple[Format, list[RankSource]]:
    """Decide the input's format and list one source per rank, each with its reader.

    ``path`` itself may be a rank result; else its subdirectories are: those of the first
    format (priority order) that any of them has, plus, beside torch_npu layouts, those
    that hold no kernels but steps, communication or memory. The format returned is the
    kernel ranks' (``no_kernels`` when none has kernels). InputError says what was looked
    for when nothing is found.
    """
    if not present(path):  # an unreadable parent or a too-long name: one line, not a crash
        raise InputError(path, "no such file or directory")
    own = _kernel_format(path) or (KERNEL_LESS if KERNEL_LESS.is_rank_dir(path) else None)
    if own is not None:
        return own, [RankSource(path, own)]
    children = _child_directories(path)[0] if is_directory(path) else []
    formats = {child: _kernel_format(child) for child in children}
    fmt = next((f for f in FORMATS if any(found is f for found in formats.values())), None)
    sources = [RankSource(child, fmt) for child in children if fmt and formats[child] is fmt]
    if fmt is None or fmt.name in TORCH_LAYOUTS:
        sources += [RankSource(child, KERNEL_LESS) for child in children
                    if formats[child] is None and KERNEL_LESS.is_rank_dir(child)]
    if not sources:
        raise InputError(path, f"no profile found: looked for {_looked_for()} in this "
                               "directory and in its subdirectories")
    # All are entries of one directory: by name is by path, and faster.
    return fmt or KERNEL_LESS, sorted(sources, key=lambda s: s.path.name)


def _child_directories(path: Path) -> tuple[list[Path], list[Note]]:
    """The subdirectories of ``path``, and a warning for each entry that cannot be examined.

    An entry beside the rank directories that no reader needs (a symbolic-link loop, a
    dangling mount, EACCES) is skipped: it says nothing about the ranks that are there.
    """
    children, skipped = [], []
    for entry in list_dir(path):
        try:
            if is_directory(entry):
                children.append(entry)
        except InputError as exc:
            skipped.append(Note("rank-skipped", f"{entry.name}: {exc.message}; skipped"))
    return children, skipped


def unread_children(path: Path, sources: list[RankSource]) -> list[Note]:
    """Rank-like subdirectories that no reader accepted (nothing readable in them)."""
    paths = {s.path for s in sources}
    if not path.is_dir() or path in paths:
        return []
    unexamined = _child_directories(path)[1]
    return unexamined + [Note("rank-skipped", f"{child.name}: no readable profile (looked for "
                              f"{_looked_for()}); rank skipped")
            for child in sorted(path.iterdir())
            if child.is_dir() and child not in paths
            and (child.name.endswith(("_ascend_pt", "_ascend_ms")) or
                 (child / torch_text.OUTPUT_DIR).is_dir())]
