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
* ``brief`` lists no field of the run part: one line counts them by kind
  (:func:`expected_counts`), so the scheduler's bookkeeping (job, step and array ids,
  ports, pids, the submitit folder) never shows there.
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
    "FieldRow",
    "MetricRow",
    "compared_label",
    "diff_html",
    "diff_html_section",
    "diff_markdown",
    "field_rows",
    "expected_counts",
    "kind_of",
    "metric_rows",
    "short",
]

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


#: what a run-part field is about, for --brief's one line (first match wins); the
#: scheduler's bookkeeping (job, step and array ids, ports, pids, the submitit folder,
#: node-local ids) differs between any two runs and is never shown there
_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("times", ("run.started", "run.ended", "run.duration_s")),
    (
        "scheduler",
        (
            "run.pid",
            "run.env.SLURM_",
            "run.env.SUBMITIT",
            "run.env.MASTER_PORT",
            "run.env.MASTER_ADDR",
            "run.env.MUSHIN_MASTER_PORT",
            "run.env.TORCHELASTIC",
            "run.env.CUDA_VISIBLE_DEVICES",
            "run.topology.slurm",
            "run.launcher.config.submitit_folder",
            "run.env.APPTAINERENV_",
        ),
    ),
    ("topology", ("run.topology", "run.launcher", "run.config")),
    ("host", ("run.host", "run.platform")),
    ("container", ("run.container", "run.image", "run.rank_runtime")),
    ("devices", ("run.devices",)),
    ("fingerprints", ("run.fingerprints",)),
    ("reproduction", ("run.reproduction", "run.task")),
)


def kind_of(path: str) -> str:
    """What a run-part field is about: ``times``, ``scheduler``, ``topology``, ``host``,
    ``container``, ``devices``, ``fingerprints``, ``reproduction`` or ``other``.

    Examples
    --------
    >>> kind_of("run.env.SLURM_JOB_ID"), kind_of("run.topology.ranks[3]"), kind_of("run.x")
    ('scheduler', 'topology', 'other')
    """
    for kind, prefixes in _KINDS:
        if any(path == p or path.startswith((p, f"{p}.", f"{p}[")) for p in prefixes):
            return kind
    return "other"


def expected_counts(diff: Any) -> str:
    """``--brief``'s one line about the expected differences: how many, by kind.

    Examples
    --------
    >>> from types import SimpleNamespace as N
    >>> f = [N(path="run.pid"), N(path="run.env.SLURM_JOB_ID"), N(path="run.ended")]
    >>> expected_counts(N(expected=f))
    'Expected to differ: 3 field(s): 2 scheduler, 1 times'
    """
    counts: dict[str, int] = {}
    for f in diff.expected:
        counts[kind_of(f.path)] = counts.get(kind_of(f.path), 0) + 1
    if not counts:
        return "Expected to differ: nothing"
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{n} {kind}" for kind, n in ranked)
    return f"Expected to differ: {len(diff.expected)} field(s): {text}"


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


def field_rows(diff: Any, attr: str) -> list[FieldRow]:
    """The rows of ``breaks`` or ``expected`` over all cells."""
    from mushin_box._provenance.compare import collapse_key

    rows: list[FieldRow] = []
    for cell in diff.cells:
        label = compared_label(cell)
        fields = list(getattr(cell, attr))
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
    return rows


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
    breaks = field_rows(diff, "breaks")
    out += ["", f"### Breaks reproducibility ({len(breaks)})", ""]
    out.append(_md_fields(breaks, sweep) if breaks else "Nothing.")
    if brief:  # one line: how many fields are expected to differ, by kind
        return "\n".join([*out, "", expected_counts(diff) + "."]) + "\n"
    expected = field_rows(diff, "expected")
    out += ["", f"### Expected to differ ({len(expected)})", ""]
    out.append(_md_fields(expected, sweep) if expected else "Nothing.")
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
    breaks = field_rows(diff, "breaks")
    out.append(f"<{sub}>Breaks reproducibility ({len(breaks)})</{sub}>")
    out.append(_html_fields(breaks, sweep, "breaks") if breaks else "<p>Nothing.</p>")
    if brief:
        out.append(f'<p class="meta">{esc(expected_counts(diff))}.</p>')
        return "\n".join(out)
    expected = field_rows(diff, "expected")
    out.append(f"<{sub}>Expected to differ ({len(expected)})</{sub}>")
    out.append(_html_fields(expected, sweep, "expected") if expected else "<p>Nothing.</p>")
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
