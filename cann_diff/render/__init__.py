"""Render stage: the Report as report.md, report.html, report.json, ranks.csv and PNG charts.

Every output reads the one Report model (``cann_diff/report.py``); nothing here computes.
report.md and report.html lay out the same blocks (``content.py``). The model (and so
pandas) is imported inside the functions: the CLI imports ``render.files`` at start-up, and
``--help`` must not pay for pandas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .files import UNDECODABLE, write_atomic, write_images, write_text_atomic

if TYPE_CHECKING:
    from ..report import Report
    from .chart_workers import ChartWorkers


def write_ranks_csv(report: Report, path: Path) -> Path:
    """Every rank of the report, for a spreadsheet (the Markdown shows the top movers).

    Written even for one rank, so that a reused output directory holds no stale table.
    """
    import pandas as pd

    from ..report import RankRow, to_json

    columns = list(RankRow.__dataclass_fields__)
    table = pd.DataFrame([to_json(r) for r in report.ranks], columns=columns)
    return write_atomic(path, lambda temp: table.to_csv(temp, index=False, float_format="%.3f",
                                              encoding="utf-8", errors=UNDECODABLE))


def write_report(report: Report, out_dir: Path, charts: bool = True,
                 html: bool = True, images: Mapping[str, bytes] | None = None,
                 workers: ChartWorkers | None = None) -> list[Path]:
    """Write every output of ``report`` into ``out_dir``; returns the paths written.

    ``charts``: the PNGs (report.md links them, report.html carries them inline), drawn
    here (with ``workers``, if given: ``chart_workers.ChartWorkers``) unless
    ``images`` holds them already ({chart name: PNG bytes}, as ``chart_images`` gives
    them); ``html``: write report.html as well.
    """
    from .markdown import render_markdown

    out_dir = Path(out_dir)
    if not charts:
        images = {}
    elif images is None and workers is not None:
        images = workers.images(report)
    elif images is None:
        from .charts import chart_images

        images = chart_images(report)
    drawn = write_images(out_dir, images)
    written = [*drawn.values(), write_ranks_csv(report, out_dir / "ranks.csv")]
    links = {name: path.name for name, path in drawn.items()}
    written.append(write_text_atomic(out_dir / "report.md", render_markdown(report, links)))
    if html:
        from .html import render_html

        written.append(write_text_atomic(out_dir / "report.html", render_html(report, images)))
    written.append(write_text_atomic(
        out_dir / "report.json",
        json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"))
    return written
