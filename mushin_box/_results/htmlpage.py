# SPDX-License-Identifier: MIT
"""A small HTML renderer for the pages mushin-box writes (``report``, ``diff --html``),
and the Markdown table of ``show --md`` and ``diff --md``.

Design note: a page is one self-contained file that a colleague opens from a mail or a
shared drive, often on a machine without internet access. So everything is inline (the
CSS here, the plots as SVG), nothing is fetched, and there is no JavaScript: a page shows
the same everywhere, and nothing in it can reach out. What a reader toggles (a plot's log
axis) is a checkbox and CSS; what they hover (a point's value) an SVG ``<title>``. Every
text that comes from a file goes through :func:`esc`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

__all__ = ["CSS", "GENERATOR", "esc", "is_page", "md_table", "page", "table"]

#: the mark every page carries in its head, so that ``report -o FILE`` knows an earlier page
#: (which it may replace) from a file it must not write over
GENERATOR = '<meta name="generator" content="mushin-box">'
#: how far into a file :func:`is_page` looks for the mark
_HEAD_BYTES = 4096

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #1f2328; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin: 1.6em 0 .5em;
  border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
h3 { font-size: 1em; margin: .8em 0 .3em; }
.meta { color: #57606a; margin: 0 0 1em; }
table { border-collapse: collapse; margin: .4em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; }
tr.best td { background: #dafbe1; font-weight: 600; }
.state-completed { color: #1a7f37; } .state-failed, .state-timeout { color: #cf222e; }
.state-cancelled, .state-skipped { color: #9a6700; } .state-running { color: #0969da; }
.state-pending { color: #6e7781; }
.breaks th { background: #ffebe9; } .expected th { background: #fff8c5; }
.verdict-ok { color: #1a7f37; font-weight: 600; }
.verdict-bad { color: #cf222e; font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 1.2em; }
figure.plot { margin: 0; } figure.plot figcaption { font-weight: 600; margin-bottom: .2em; }
.legend { display: flex; flex-wrap: wrap; gap: .2em 1em; max-width: 480px; font-size: 12px; }
.swatch { display: inline-block; width: 14px; height: 3px; vertical-align: middle;
          margin-right: 4px; }
.swatch.dashed { background: repeating-linear-gradient(90deg, #57606a 0 5px, #fff 5px 8px); }
.swatch.band { background: #8c959f; opacity: 0.5; height: 9px; }
.more { color: #57606a; }
.legend .best { font-weight: 700; }
.logy, .logy-label { float: right; font-size: 12px; margin: 0 0 0 .3em; }
.logy:checked ~ .scale.lin, .logy:not(:checked) ~ .scale.log { display: none; }
figure.heatmap { margin: 0; }
pre.error { white-space: pre-wrap; background: #f6f8fa; padding: .5em; margin: .2em 0;
            max-height: 12em; overflow: auto; }
.note { background: #f6f8fa; border-left: 4px solid #d0d7de; padding: .4em .8em; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
"""


def esc(text: object) -> str:
    """Text (any value, as ``str``) safe inside an element or a quoted attribute."""
    return html.escape(str(text), quote=True)


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    row_classes: Iterable[str] | None = None,
    numeric: Sequence[bool] | None = None,
    cls: str = "",
) -> str:
    """A table; headers are escaped here, cells must already be HTML (``esc`` them)."""
    out = [f'<table class="{esc(cls)}">' if cls else "<table>", "<thead><tr>"]
    out += [f"<th>{esc(h)}</th>" for h in headers]
    out.append("</tr></thead><tbody>")
    classes = iter(row_classes) if row_classes is not None else None
    for row in rows:
        row_cls = next(classes, "") if classes is not None else ""
        out.append(f'<tr class="{esc(row_cls)}">' if row_cls else "<tr>")
        for i, cell in enumerate(row):
            num = numeric is not None and i < len(numeric) and numeric[i]
            out.append(f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def page(title: str, body: str) -> str:
    """A whole HTML document: ``body`` (HTML) under a title, with the inline CSS."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f"{GENERATOR}\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        # nothing may be fetched: the page works offline, and says so to the browser
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">\n"
        f"<title>{esc(title)}</title>\n<style>{CSS}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def is_page(head: bytes) -> bool:
    """Do these first bytes of a file start a page mushin-box wrote (the generator mark,
    or the title of a page written before the mark was)?

    Examples
    --------
    >>> is_page(page("mushin-box report: lr", "").encode()), is_page(b'{"loss": 0.5}')
    (True, False)
    """
    head = head[:_HEAD_BYTES]
    if not head.startswith(b"<!DOCTYPE html>"):
        return False
    return GENERATOR.encode() in head or b"<title>mushin-box " in head


_MD_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\|*_`<>[]"})


def _md_cell(text: str) -> str:
    # Markdown would read `_target_` as emphasis and `|` as a column break
    return " ".join(str(text).split()).translate(_MD_SPECIAL) or " "


def md_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (cells as literal text: Markdown's special
    characters escaped, newlines folded).

    Examples
    --------
    >>> print(md_table(["a", "b"], [["1", "x|_y_"]]))
    | a | b |
    |---|---|
    | 1 | x\\|\\_y\\_ |
    """
    lines = [
        "| " + " | ".join(map(_md_cell, headers)) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(map(_md_cell, row)) + " |" for row in rows]
    return "\n".join(lines)
