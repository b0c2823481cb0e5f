# SPDX-License-Identifier: MIT
"""The rendered docs hide the docs tests' markers; the Markdown source keeps them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from conftest import REPO

HOOK = REPO / "scripts" / "mkdocs_hooks.py"


def _hook():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mkdocs_yml_installs_the_hook() -> None:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"^hooks:\n\s+- scripts/mkdocs_hooks\.py$", text, re.M)


def test_rendered_pages_lose_only_the_marker_lines() -> None:
    hook = _hook()
    marker = re.compile(r"^\s*#\s*docs:\s*(skip|slow|slurm)\b")
    pages = sorted((REPO / "docs").glob("*.md"))
    hidden = 0
    for page in pages:
        source = page.read_text(encoding="utf-8")
        shown = hook.on_page_markdown(source, page=None, config=None, files=None)
        kept = [line for line in source.splitlines() if not marker.match(line)]
        assert shown.splitlines() == kept, page.name
        hidden += len(source.splitlines()) - len(kept)
    assert hidden >= 10  # the docs do carry markers (skip, slow, slurm)


def test_a_marker_in_prose_stays(tmp_path: Path) -> None:
    text = "Mark a block with\n# docs: skip: why\n\n```bash\n# docs: skip: why\necho hi\n```\n"
    shown = _hook().hide_markers(text)
    assert shown == "Mark a block with\n# docs: skip: why\n\n```bash\necho hi\n```\n"
