# SPDX-License-Identifier: MIT
"""A :class:`~mushin_box._results.diff.Diff` as rows a person reads: the terminal tables of
``mushin-box diff``, its ``--md`` and ``--html``, and the diff section of ``report``.

Every output shows the same rows, built once here:

* hashes (40 to 64 hex digits: SHA-256, git commits) are cut to their first 12 digits, as
  ``git log --oneline`` does; ``--json`` keeps them whole;
* a cell is named by its directory (``lr=0.1``), a run without swept values ``run``, and
  a cell that one side lacks shows as the row ``(the whole cell)``: present / missing;
* paths that differ only in a list index are merged when there are many
  (``run.topology.ranks[*].hostname (8 rows)``);
* ``brief`` hides the rows of the run part that differ between any two runs
  (:data:`ALWAYS_DIFFER`: times, pid, host, the run's fingerprints) and says how many.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._results.htmlpage import esc, md_table, page, table
from mushin_box._results.table import cell_text

__all__ = [
    "ALWAYS_DIFFER",
    "FieldRow",
    "MetricRow",
    "always_differs",
    "compared_label",
    "diff_html",
    "diff_html_section",
    "diff_markdown",
    "field_rows",
    "metric_rows",
    "short",
]

#: run-part paths that differ between any two runs, even of the same experiment
ALWAYS_DIFFER = (
    "run.started",
    "run.ended",
    "run.duration_s",
    "run.pid",
    "run.host",
    "run.fingerprints",
)
_MAX_VALUE = 60  # characters of a value shown in a table cell
_GROUP_OVER = 3  # more rows than this with the same [*] path are shown as one row
_HASH = re.compile(r"(?<![0-9A-Za-z])([0-9a-f]{12})[0-9a-f]{28,52}(?![0-9A-Za-z])")
WHOLE_CELL = "(the whole cell)"


@attrs.frozen
class FieldRow:
    cell: str
    path: str
    a: str
    b: str


@attrs.frozen
class MetricRow:
    cell: str
    name: str
    a: str
    b: str
    delta: str
    match: bool


def always_differs(path: str) -> bool:
    """Is ``path`` a run-part field that differs between any two runs (``--brief``)?

    Examples
    --------
    >>> always_differs("run.fingerprints.code"), always_differs("run.env.X")
    (True, False)
    """
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in ALWAYS_DIFFER)


def short(value: Any) -> str:
    """A value as table text: hashes cut to 12 hex digits, at most 60 characters.

    Examples
    --------
    >>> short("sha256:" + "ab" * 32)
    'sha256:abababababab'
    >>> short(None), short([1, "x"])
    ('-', '[1, "x"]')
    """
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = _HASH.sub(r"\1", text)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _number(value: Any) -> str:
    return cell_text(value) if isinstance(value, float) else short(value)


def compared_label(cell: Any) -> str:
    """A compared cell's name: its directory (``lr=0.1``), or ``run`` without swept values."""
    if not cell.combo:
        return "run"
    where = cell.a or cell.b
    return Path(where).name if where else str(cell.name)


def _side(f: Any, side: str) -> str:
    absent = (side == "a" and f.change == "only_b") or (side == "b" and f.change == "only_a")
    return "(absent)" if absent else short(getattr(f, side))


def field_rows(diff: Any, attr: str, *, brief: bool = False) -> tuple[list[FieldRow], int]:
    """The rows of ``breaks`` or ``expected`` over all cells, and how many ``brief`` hid."""
    from mushin_box._provenance.compare import collapse_key

    rows: list[FieldRow] = []
    hidden = 0
    for cell in diff.cells:
        label = compared_label(cell)
        fields = list(getattr(cell, attr))
        if brief and attr == "expected":
            kept = [f for f in fields if not always_differs(f.path)]
            hidden += len(fields) - len(kept)
            fields = kept
        groups: dict[str, list[Any]] = {}
        for f in fields:
            groups.setdefault(collapse_key(f.path), []).append(f)
        for key, items in groups.items():
            if len(items) > _GROUP_OVER:
                rows.append(FieldRow(label, f"{key} ({len(items)} rows)", "…", "…"))
                continue
            for f in items:
                if f.path == "<cell>":
                    rows.append(FieldRow(label, WHOLE_CELL, str(f.a), str(f.b)))
                else:
                    rows.append(FieldRow(label, f.path, _side(f, "a"), _side(f, "b")))
    return rows, hidden


def metric_rows(diff: Any) -> list[MetricRow]:
    rows = []
    for cell in diff.cells:
        for m in cell.metrics:
            if m.delta is None:
                delta = ""
            elif isinstance(m.a, list):
                delta = f"max {m.delta:.3g}"
            else:
                delta = f"{m.delta:+.3g}"
            rows.append(
                MetricRow(
                    compared_label(cell),
                    m.name,
                    _number(m.a) if m.in_a else "(absent)",
                    _number(m.b) if m.in_b else "(absent)",
                    delta,
                    bool(m.match),
                )
            )
    return rows


def _hidden_note(hidden: int) -> str:
    return f"{hidden} row(s) that differ between any two runs hidden (times, pid, host)"


# ---------------------------------------------------------------------------- Markdown


def _md_fields(rows: Sequence[FieldRow], sweep: bool) -> str:
    headers = [*(["cell"] if sweep else []), "path", "A", "B"]
    return md_table(headers, ([*([r.cell] if sweep else []), r.path, r.a, r.b] for r in rows))


def _md_metrics(diff: Any, sweep: bool) -> list[str]:
    metrics = metric_rows(diff)
    out = ["", f"### Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})", ""]
    if not metrics:
        return [*out, "None recorded."]
    headers = [*(["cell"] if sweep else []), "metric", "A", "B", "Δ (B-A)", "match"]
    rows = (
        [*([m.cell] if sweep else []), m.name, m.a, m.b, m.delta, "yes" if m.match else "no"]
        for m in metrics
    )
    return [*out, md_table(headers, rows)]


def diff_markdown(diff: Any, *, brief: bool = False, results: bool = True) -> str:
    """The diff as Markdown: the verdict, the metrics side by side, then what breaks
    reproducibility and what is expected to differ (``results=False``: the verdict leaves
    the metrics out)."""
    sweep = diff.kind == "sweep"
    mark = "✅" if diff.same(results=results) else "❌"
    out = [
        f"## mushin-box diff: {mark} {diff.verdict(results=results)}",
        "",
        f"- **A** `{diff.a}`",
        f"- **B** `{diff.b}`",
    ]
    if sweep:
        out.append(f"- {len(diff.cells)} cell(s) compared, matched by their swept values")
    out += _md_metrics(diff, sweep)
    breaks, _ = field_rows(diff, "breaks")
    out += ["", f"### Breaks reproducibility ({len(breaks)})", ""]
    out.append(_md_fields(breaks, sweep) if breaks else "Nothing.")
    expected, hidden = field_rows(diff, "expected", brief=brief)
    out += ["", f"### Expected to differ ({len(expected)})", ""]
    out.append(_md_fields(expected, sweep) if expected else "Nothing.")
    if hidden:
        out += ["", f"_{_hidden_note(hidden)}._"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- HTML


def _html_fields(rows: Iterable[FieldRow], sweep: bool, cls: str) -> str:
    headers = [*(["cell"] if sweep else []), "path", "A", "B"]
    body = (
        [*([esc(r.cell)] if sweep else []), f"<code>{esc(r.path)}</code>", esc(r.a), esc(r.b)]
        for r in rows
    )
    return table(headers, body, cls=cls)


def _html_metrics(diff: Any, sweep: bool, sub: str) -> list[str]:
    metrics = metric_rows(diff)
    out = [f"<{sub}>Metrics (atol={diff.atol:g}, rtol={diff.rtol:g})</{sub}>"]
    if not metrics:
        return [*out, "<p>None recorded.</p>"]
    headers = [*(["cell"] if sweep else []), "metric", "A", "B", "Δ (B-A)", "match"]
    body = (
        [*([esc(m.cell)] if sweep else []), esc(m.name), esc(m.a), esc(m.b), esc(m.delta)]
        + ["yes" if m.match else '<b class="verdict-bad">no</b>']
        for m in metrics
    )
    numeric = [*([False] if sweep else []), False, True, True, True, False]
    return [*out, table(headers, body, numeric=numeric)]


def diff_html_section(
    diff: Any, *, brief: bool = False, heading: str = "h2", results: bool = True
) -> str:
    """The diff as an HTML fragment (headings from ``heading`` down): the verdict, the
    metrics, then the fields that break reproducibility and those expected to differ."""
    sub = f"h{min(int(heading[1]) + 1, 6)}"
    sweep = diff.kind == "sweep"
    ok = diff.same(results=results)
    out = [
        f'<p class="{"verdict-ok" if ok else "verdict-bad"}">'
        f"{esc(diff.verdict(results=results))}</p>",
        f"<p><b>A</b> <code>{esc(diff.a)}</code><br><b>B</b> <code>{esc(diff.b)}</code></p>",
        *_html_metrics(diff, sweep, sub),
    ]
    breaks, _ = field_rows(diff, "breaks")
    out.append(f"<{sub}>Breaks reproducibility ({len(breaks)})</{sub}>")
    out.append(_html_fields(breaks, sweep, "breaks") if breaks else "<p>Nothing.</p>")
    expected, hidden = field_rows(diff, "expected", brief=brief)
    out.append(f"<{sub}>Expected to differ ({len(expected)})</{sub}>")
    out.append(_html_fields(expected, sweep, "expected") if expected else "<p>Nothing.</p>")
    if hidden:
        out.append(f'<p class="meta">{esc(_hidden_note(hidden))}.</p>')
    return "\n".join(out)


def diff_html(diff: Any, *, brief: bool = False, results: bool = True) -> str:
    """The diff as a self-contained HTML page (nothing fetched)."""
    from mushin_box._core.version import __version__

    body = (
        f"<h1>mushin-box diff</h1>\n"
        f'<p class="meta">written by mushin-box {esc(__version__)}</p>\n'
        + diff_html_section(diff, brief=brief, results=results)
    )
    return page(f"mushin-box diff: {Path(diff.a).name} vs {Path(diff.b).name}", body)
