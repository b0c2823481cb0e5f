# SPDX-License-Identifier: MIT
"""mkdocs hook (``hooks:`` in mkdocs.yml): the rendered pages hide the docs tests' markers.

``tests/package/test_docs.py`` runs every code block of ``docs/*.md`` and reads a
``# docs: skip: REASON``, ``# docs: slow`` or ``# docs: slurm`` first line as how to run it.
Those lines are for the test, not the reader, who copies the block: the page keeps them in
its Markdown source, and the site drops them from the code blocks it renders.
"""

from __future__ import annotations

import re
from typing import Any

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
MARK = re.compile(r"^\s*#\s*docs:\s*(skip|slow|slurm)\b")


def hide_markers(markdown: str) -> str:
    """``markdown`` without the test markers inside its fenced code blocks (a marker line
    outside a fence is prose about them, kept).

    Examples
    --------
    >>> page = "# docs: slurm\\n```bash\\n# docs: slurm\\nmushin-box ls\\n```\\n"
    >>> print(hide_markers(page), end="")
    # docs: slurm
    ```bash
    mushin-box ls
    ```
    """
    out: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines(keepends=True):
        found = FENCE.match(line)
        if fence is None and found:
            fence = found.group(1)
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is not None and MARK.match(line):
            continue
        out.append(line)
    return "".join(out)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs' hook: each page's Markdown, before it is rendered."""
    return hide_markers(markdown)
