# SPDX-License-Identifier: MIT
"""What a report shows of a sweep too large to show whole (thousands of cells).

Design note: a page with a 10,000-row table and 10,000 curves per plot (20 MB of SVG at
10 epochs) takes a browser many seconds to open, and no one reads it. So past a number of
cells the report keeps what a reader looks at, and links the rest:

* the table shows the best ``rows`` cells (by ``--best``; else the first, in the table's
  order), and the whole table is in the page as a CSV file (a ``data:`` link: the page
  stays one file that fetches nothing, under ``default-src 'none'``);
* each plot draws the ``curves`` best cells' lines (chosen the same way), and the rest as
  one grey band from their lowest to their highest value at each epoch.

Examples
--------
>>> from mushin_box._sweepdir.board import CellView
>>> cells = [CellView(dir=f"x={i}", combo={"x": i}, state="completed",
...          recorded_state="completed", metrics={"loss": 5.0 - i}) for i in range(5)]
>>> [c.dir for c in top_cells(cells, 2, "loss", False)]
['x=4', 'x=3']
>>> band([[0.0, 1.0], [0.0, 1.0]], [[3.0, 2.0], [1.0, float("nan")]])
([0.0, 1.0], [1.0, 2.0], [3.0, 2.0])
"""

from __future__ import annotations

import base64
import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from mushin_box._sweepdir.board import CellView

__all__ = ["CURVES", "ROWS", "band", "csv_link", "table_csv", "top_cells"]

#: the most table rows a report shows (the CSV link holds them all)
ROWS = 500
#: the most cells drawn as lines per plot (the others: a band)
CURVES = 20


def top_cells(
    cells: Sequence[CellView], n: int, metric: str | None, highest: bool
) -> list[CellView]:
    """The ``n`` best cells by ``metric`` (cells without a finite value last, in order);
    without a metric, the first ``n``."""
    if metric is None:
        return list(cells[:n])

    def rank(at_cell: tuple[int, CellView]) -> tuple[bool, float, int]:
        at, cell = at_cell
        value = cell.metrics.get(metric, math.nan)
        missing = not math.isfinite(value)
        return missing, 0.0 if missing else (-value if highest else value), at

    return [c for _, c in sorted(enumerate(cells), key=rank)[:n]]


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True)
    return value


def table_csv(records: Sequence[dict[str, Any]], fields: Sequence[str]) -> str:
    """The rows as ``mushin-box show --csv`` prints them."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(fields), extrasaction="ignore")
    writer.writeheader()
    for record in records:
        writer.writerow({k: _csv_value(v) for k, v in record.items()})
    return out.getvalue()


def csv_link(text: str, name: str, label: str) -> str:
    """An ``<a download>`` holding ``text`` as a ``data:`` URI (nothing fetched)."""
    from mushin_box._results.htmlpage import esc

    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    return (
        f'<a class="csv" download="{esc(name)}" href="data:text/csv;charset=utf-8;base64,'
        f'{data}">{esc(label)}</a>'
    )


def band(
    xss: Sequence[Sequence[float]], yss: Sequence[Sequence[float]]
) -> tuple[list[float], list[float], list[float]]:
    """(x, lowest, highest) over several curves, at each x any of them has a finite
    value, in increasing x."""
    low: dict[float, float] = {}
    high: dict[float, float] = {}
    for xs, ys in zip(xss, yss, strict=True):
        for x, y in zip(xs, ys, strict=False):
            if math.isfinite(x) and math.isfinite(y):
                if x not in low or y < low[x]:
                    low[x] = y
                if x not in high or y > high[x]:
                    high[x] = y
    xs = sorted(low)
    return xs, [low[x] for x in xs], [high[x] for x in xs]
