"""One JSON document from bytes, fast: orjson when importable, the garbage collector paused.

A communication.json of a large run is millions of small dicts and lists; the collector
walks them again and again while they are built (at 1M kernels it cost more than the
parser: 0.44 s a side, 0.21 s with it paused). orjson builds the same objects several
times faster. What orjson refuses but ``json`` accepts (NaN, Infinity, integers beyond
64 bits, UTF-16 text) is parsed again by ``json``, so the result and the errors
(``ValueError``) are ``json.loads``'s.
"""

from __future__ import annotations

import gc
import importlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


def optional_module(name: str) -> ModuleType | None:
    """The module, or None when it is not installed.

    Imported by name so that the type checker sees the same ``ModuleType | None`` whether
    or not the module is installed where it runs.
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


orjson = optional_module("orjson")  # optional: the standard parser gives the same objects


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for building or walking a large parsed document.

    Parsed JSON holds no reference cycles (it is freed by reference counting), yet every
    collection while it is alive walks all of its objects: on a communication.json of 75k
    collectives, building the columns took 1.35 s with the collector on, 1.05 s paused.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def loads(data: str | bytes):
    """``json.loads(data)``, faster; raises ValueError (json.JSONDecodeError) on bad input."""
    with collector_paused():
        if orjson is not None:
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass  # json decides: it accepts a little more, and its message is the usual
        return json.loads(data)
