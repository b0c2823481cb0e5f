# SPDX-License-Identifier: MIT
"""Every code block of the README and of ``docs/*.md`` runs as written.

A small collector over fenced blocks (why not pytest-markdown-docs or phmdoctest: both run
Python blocks only, and half of the pages' examples are ``mushin-box`` command lines; one
collector runs both kinds in one shared directory, so a page's shell block reads the sweep
its Python block wrote). The rules, also stated in docs/testing.md:

- a ``python`` block runs; the blocks of one page share one namespace, in page order;
- a ``bash``/``sh`` block runs under ``bash -euo pipefail``; a ``console`` block runs its
  ``$ `` lines (the rest is their output, not compared);
- every block of a page runs in one fresh directory holding a link to the checkout's
  ``examples/`` and ``.venv/``, with ``.venv/bin`` first on ``PATH`` and no SLURM
  controller reachable (``launch`` runs on local CPU ranks);
- a block whose first line is ``# docs: skip: REASON`` is reported skipped with REASON
  (a real GPU cluster, real Apptainer): the mark is visible in the page;
  ``# docs: slow`` marks a block that starts ranks (pytest's ``slow`` mark);
  ``# docs: slurm`` runs a block against the local SLURM cluster (the ``slurm_cluster``
  fixture and pytest's ``slurm`` mark): the same directory, with ``SLURM_CONF`` pointing
  at the cluster (4 nodes, 4 fake GPUs each, default partition ``debug``), so ``launch``
  submits there;
- other fences (``text``, ``toml``, ``json``) are output or files, not run; a fence with
  no language fails, so a command cannot hide in one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PYTHON = {"python", "py"}
SHELL = {"bash", "sh", "shell", "console"}
DATA = {"text", "toml", "json", "yaml", "ini", "diff", "output"}
FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
MARK = re.compile(r"^#\s*docs:\s*(?P<kind>skip|slow|slurm)\b:?\s*(?P<reason>.*)$")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def mark(self) -> tuple[str, str] | None:
        first = self.code.lstrip("\n").split("\n", 1)[0].strip()
        m = MARK.match(first)
        return (m["kind"], m["reason"].strip()) if m else None


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their language and 1-based line."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        lang = m["info"].strip().split(" ", 1)[0].lower().lstrip("{.").rstrip("}")
        out.append(Block(page, i + 1, lang, "\n".join(body) + "\n"))
        i = j + 1
    return out


ALL = [b for p in PAGES for b in blocks(p)]
RUNNABLE = [b for b in ALL if b.lang in PYTHON | SHELL]


@dataclass
class PageState:
    """What the blocks of one page share: a directory and a Python namespace."""

    directory: Path
    namespace: dict[str, Any] = field(default_factory=dict)


_STATES: dict[Path, PageState] = {}


@pytest.fixture
def page_state(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    block: Block = request.node.callspec.params["block"]
    state = _STATES.get(block.page)
    if state is None:
        d = tmp_path_factory.mktemp(block.page.stem)
        for name in ("examples", "containers", ".venv"):
            (d / name).symlink_to(REPO / name)
        state = _STATES[block.page] = PageState(d)
    return state


def _env(directory: Path, slurm_conf: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "MUSHIN_"))}
    if slurm_conf is not None:
        env["SLURM_CONF"] = str(slurm_conf)  # the local cluster, and no other SLURM state
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(directory)  # no user profile or cache leaks into the example
    env["PYTHONPATH"] = str(directory)
    return env


def _shell_script(block: Block) -> str:
    if block.lang != "console":
        return block.code
    cmds = [ln[2:] for ln in block.code.splitlines() if ln.startswith("$ ")]
    assert cmds, f"{block.id}: a console block runs its '$ ' lines and has none; use ```text"
    return "\n".join(cmds) + "\n"


def _params() -> list[Any]:
    out = []
    for b in RUNNABLE:
        marks: list[Any] = []
        if b.mark is not None and b.mark[0] == "slow":
            marks.append(pytest.mark.slow)
        if b.mark is not None and b.mark[0] == "slurm":
            marks.append(pytest.mark.slurm)
        out.append(pytest.param(b, id=b.id, marks=marks))
    return out


@pytest.mark.parametrize("block", _params())
def test_block_runs(
    block: Block,
    page_state: PageState,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if block.mark is not None and block.mark[0] == "skip":
        pytest.skip(f"marked in the page: {block.mark[1]}")
    conf = None
    if block.mark is not None and block.mark[0] == "slurm":
        # skips without a cluster, fails instead under MUSHIN_REQUIRE_SLURM=1 (CI)
        conf = request.getfixturevalue("slurm_cluster").conf
    d = page_state.directory
    if block.lang in PYTHON:
        monkeypatch.chdir(d)
        monkeypatch.syspath_prepend(str(d))
        for k in [k for k in os.environ if k.startswith("SLURM")]:
            monkeypatch.delenv(k)
        if conf is not None:
            monkeypatch.setenv("SLURM_CONF", str(conf))
        code = compile(block.code, f"{block.id}", "exec")
        ns = page_state.namespace
        ns.setdefault("__name__", f"docs_{block.page.stem.replace('-', '_')}")
        exec(code, ns)  # noqa: S102 - the page's own example
        return
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _shell_script(block)],
        cwd=d,
        env=_env(d, conf),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, (
        f"{block.id} exited {result.returncode}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )


def test_every_fence_names_its_language() -> None:
    known = PYTHON | SHELL | DATA
    bad = [f"{b.id} ({b.lang or 'no language'})" for b in ALL if b.lang not in known]
    assert not bad, f"fences with no or an unknown language (use text for output): {bad}"


def test_every_page_opens_with_an_example_that_runs() -> None:
    # the first code block of each page is run, not skipped: a reader can paste it here
    bad = []
    for page in PAGES[1:]:  # the README opens with the suite itself (skipped, marked)
        first = next((b for b in blocks(page) if b.lang in PYTHON | SHELL), None)
        if first is None or (first.mark is not None and first.mark[0] == "skip"):
            bad.append(str(page.relative_to(REPO)))
    assert not bad, f"pages whose first example is missing or skipped: {bad}"


def test_the_collector_sees_the_blocks() -> None:
    # a parser that silently found nothing would pass every other test here
    assert len(RUNNABLE) >= 30, len(RUNNABLE)
    assert {b.lang for b in RUNNABLE} >= {"python", "bash", "console"}
    # and the blocks run against the local SLURM cluster are still collected as such
    assert {b.mark[0] for b in RUNNABLE if b.mark is not None} >= {"skip", "slow", "slurm"}
    assert sys.executable
