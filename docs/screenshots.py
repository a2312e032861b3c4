"""Regenerate the README's screenshots from the shipped example, never by hand.

    python docs/screenshots.py            # docs/report-html.png (1,400 px wide)

Opens ``reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.html`` in headless Chromium
(``chromium`` or ``chromium-browser`` on PATH; Debian: ``apt-get install chromium``) and
keeps the top of the page: the comparability block when there is one, the verdict, the
provenance and the first sections. Rerun it after regenerating the example
(``cann-diff examples/cann7.0.1.3 examples/cann8.0.RC2 examples/cann8.0.RC2-mc2 -o
reports/example``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.html"
SHOTS = {"report-html.png": (1400, 1100)}


def browser() -> str:
    """The Chromium binary on PATH."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("docs/screenshots.py: no chromium on PATH (apt-get install chromium)")


def shoot(page: Path, out: Path, width: int, height: int) -> None:
    """A screenshot of ``page`` at ``width`` × ``height`` CSS px into ``out``."""
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser(), "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={profile}",
                        f"--window-size={width},{height}", f"--screenshot={out}",
                        page.as_uri()], check=True, capture_output=True, timeout=120)


def main() -> None:
    for name, (width, height) in SHOTS.items():
        shoot(PAGE, ROOT / "docs" / name, width, height)
        print(f"docs/{name}: {PAGE.relative_to(ROOT)} at {width} px")


if __name__ == "__main__":
    main()
