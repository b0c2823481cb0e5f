# SPDX-License-Identifier: MIT
"""The help examples name sweep and cell directories as the tool makes them: a sweep is
``multirun/<YYYY-MM-DD_HH-MM-SS>`` (:func:`~mushin_box._core.layout.default_sweep_dir`),
its cells ``KEY=VALUE`` (or ``cell`` for a sweep of one cell) directly inside it."""

from __future__ import annotations

import datetime as dt
import importlib
import re
import shlex

import pytest

from mushin_box._core.layout import default_sweep_dir
from mushin_box.cli.main import COMMANDS

#: the commands whose arguments name sweeps or cells
READERS = ("resume", "status", "ls", "logs", "wait", "cancel", "show", "report", "diff")
READERS += ("reproduce",)


def _paths(line: str) -> list[str]:
    words = shlex.split(line.split("  #", 1)[0])
    return [w for w in words[2:] if "/" in w and not w.startswith(("-", "/", "~"))]


def _is_real_layout(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    if parts[0] != default_sweep_dir().parent.name:
        return False
    if len(parts) >= 2:
        try:
            dt.datetime.strptime(parts[1], "%Y-%m-%d_%H-%M-%S")
        except ValueError:
            return False
    return len(parts) <= 2 or (len(parts) == 3 and bool(re.fullmatch(r"[^=]+=.+|cell", parts[2])))


@pytest.mark.parametrize("command", READERS)
def test_examples_use_the_layout_the_tool_makes(command: str) -> None:
    assert command in COMMANDS
    module = importlib.import_module(f"mushin_box.cli.{command}")
    for line in module.EXAMPLES:
        for path in _paths(line):
            assert _is_real_layout(path), f"{line!r}: {path!r} is not a sweep or cell path"


def test_the_check_refuses_a_layout_the_tool_does_not_make() -> None:
    assert not _is_real_layout("runs/lr")
    assert not _is_real_layout("multirun/2026-11-30/12-00-00/lr=0.1")  # Hydra's, not ours
    assert _is_real_layout("multirun/2026-11-30_12-00-00/lr=0.1")
