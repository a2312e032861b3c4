"""One error hierarchy; the CLI catches CannDiffError at a single site and exits 2."""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2


class CannDiffError(Exception):
    """Base of every error the tool reports to the user as one line."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, path: str | Path | None, message: str, where: str | None = None):
        self.path = None if path is None else str(path)
        self.where = where
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        """Render as ``path:where: message`` like a compiler diagnostic."""
        parts = [p for p in (self.path, self.where) if p]
        return ": ".join([*parts, self.message]) if parts else self.message


class InputError(CannDiffError):
    """An input path is missing, unreadable, truncated or of an unknown layout."""


class SchemaError(CannDiffError):
    """A file is readable but lacks the columns or keys we need."""


class OutputError(CannDiffError):
    """The output directory cannot be used (e.g. it lies inside an input)."""
