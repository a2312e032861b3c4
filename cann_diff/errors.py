"""One error hierarchy; every error carries its exit code, and the CLI catches it at one site.

Exit codes (docs/design.md "Exit codes"): 0 report written, 1 ``--fail-on-regression`` gate
failed, 2 bad input or usage, 3 internal error (a bug), 130 SIGINT, 143 SIGTERM. A CI gate
reads 1 as "regression", so nothing but the gate may exit 1.
"""

from __future__ import annotations

import re
from pathlib import Path

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_SIGINT = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
EXIT_SIGTERM = 143  # 128 + SIGTERM

# Characters that split or repaint a terminal line: C0/C1 controls, DEL, the Unicode line
# and paragraph separators, and lone surrogates (undecodable bytes of a file name).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# A caret line pointing into the line above it ("(right here) ------^" from yajl via
# ijson): meaningless once the lines are folded into one.
_POINTER_LINE = re.compile(r"^\s*(\([^)]*\))?[\s~-]*\^+[\s~-]*$", re.M)
# A line break that is layout: indentation or blank lines around it, or at either end.
_LAYOUT_BREAK = re.compile(r"^\s+|\s+$|[ \t]*\n\s+|[ \t]+\n\s*")


def escape_controls(text: str) -> str:
    r"""``text`` with every control character written as an escape (``\n``, ``\x1b``).

    A newline in a file name then cannot split an error line, nor an ESC recolour it.
    """
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape",
                                                   "backslashreplace").decode("ascii"), text)


def one_line(message: str) -> str:
    r"""A (library's) multi-line message folded onto one line.

    Line breaks that are layout (with indentation or blank lines around them) become one
    space and caret-pointer lines are dropped; any other control character, such as a bare
    newline inside a file name, is escaped (``\n``) so that nothing is lost.
    """
    message = _POINTER_LINE.sub("", message)
    message = _LAYOUT_BREAK.sub(lambda m: " " if m.start() and m.end() < len(message) else "",
                                message)
    return escape_controls(message)


class CannDiffError(Exception):
    """Base of every error the tool reports to the user as one line; exits ``exit_code``."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, path: str | Path | None, message: str, where: str | None = None):
        self.path = None if path is None else str(path)
        self.where = where
        self.message = message
        super().__init__(str(self))

    def __reduce__(self):
        """Pickle by the constructor's own arguments, so a worker's error is raised again.

        An exception pickles as ``type(error)(*error.args)`` by default, and ``args`` here is
        the rendered line, which no constructor takes; worker processes and Dask workers
        hand errors back pickled.
        """
        return (_rebuild, (type(self), self.path, self.message, self.where))

    def __str__(self) -> str:
        """Render as ``path:where: message`` like a compiler diagnostic, on one line."""
        parts = [escape_controls(p) for p in (self.path, self.where) if p]
        return ": ".join([*parts, one_line(self.message)])


def _rebuild(kind: type[CannDiffError], path: str | None, message: str,
             where: str | None) -> CannDiffError:
    """A CannDiffError of ``kind`` from its parts (subclasses may take other arguments)."""
    error = kind.__new__(kind)
    CannDiffError.__init__(error, path, message, where)
    return error


class InputError(CannDiffError):
    """An input path is missing, unreadable, truncated or of an unknown layout."""


class SchemaError(CannDiffError):
    """A file is readable but lacks the columns or keys we need."""


class OutputError(CannDiffError):
    """The output directory cannot be used (e.g. it lies inside an input)."""


class UsageError(CannDiffError):
    """An option's value is malformed (``where`` names the option)."""

    def __init__(self, option: str, message: str):
        super().__init__(None, message, where=option)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that every cleanup runs."""

    exit_code = EXIT_SIGTERM
