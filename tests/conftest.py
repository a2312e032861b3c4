"""Shared fixtures: where the real data lives, and the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
REALDATA = ROOT.parent / "shared" / "realdata"
EXAMPLES = ROOT / "examples"

needs_realdata = pytest.mark.skipif(
    not REALDATA.is_dir(),
    reason="../shared/realdata is not beside the project (a user's clone): real-data tests skip")
