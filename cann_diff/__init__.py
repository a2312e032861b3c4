"""cann-diff: what a CANN upgrade does to an Ascend NPU workload's performance, and why.

Library use::

    from cann_diff import diff
    result = diff("baseline/", "candidate/")
    print(result.report.headline)

The public names are imported on first use, so that ``cann-diff --help`` (which imports
this package) does not pay for pandas, scipy and matplotlib.
"""

from __future__ import annotations

import importlib
import sys
import types

# public name -> the module that defines it
_PUBLIC = {"Analysis": ".findings", "analyse": ".findings",
           "Comparison": ".compare", "compare": ".compare",
           "Matched": ".match", "match": ".match",
           "Options": ".pipeline", "Result": ".pipeline", "diff": ".pipeline",
           "load_run": ".read",
           "Report": ".report", "build_report": ".report",
           "Run": ".schema"}

__all__ = ["Analysis", "Comparison", "Matched", "Options", "Report", "Result", "Run",
           "__version__", "analyse", "build_report", "compare", "diff", "load_run", "match"]


def _version() -> str:
    """The installed distribution's version, else the one in the checkout's pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cann-diff")
    except PackageNotFoundError:
        pass
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib

        return tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    except (OSError, ValueError, KeyError):
        return "0+unknown"


def __getattr__(name: str):
    """Import a public name on first use (PEP 562)."""
    if name == "__version__":
        value = _version()
    elif name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """The package's module type: keeps ``match`` and ``compare`` the public functions.

    Importing the submodule ``cann_diff.match`` (or the package ``cann_diff.compare``)
    sets the attribute of that name on this package to the module, which would hide the
    function of the same name from ``from cann_diff import match``; the eager imports this
    file used to make rebound the function afterwards. Here the module is simply not bound
    (it stays in ``sys.modules``), and the function is found by ``__getattr__``.
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _PUBLIC and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
