# SPDX-License-Identifier: MIT
"""Two cells whose names differ only by control or invisible characters (issue 42, item 3):
the copy under such a name is named as a suspect and never read, so it can neither take the
real cell's place in a reader nor pass for it on the terminal."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box._sweepdir.board import read_sweep
from mushin_box.cli.main import main

SUSPECTS = ["a=1\nFAKE completed a=99", "a=1\x1b[31m", "a=1\u200b", "a=1\u202e"]


@pytest.mark.parametrize("suspect", SUSPECTS, ids=["newline", "escape", "zero-width", "bidi"])
def test_a_copy_under_a_suspect_name_is_named_and_not_merged(
    tmp_path: Path, suspect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sweep"
    cells = [write_cell(root, {"a": 1}, metrics={"y": 1.0}), write_cell(root, {"a": 2})]
    write_manifest(root, {"a": [1, 2]}, cells)
    copy = root / suspect
    shutil.copytree(cells[0], copy)
    (copy / "mushin_metrics.json").write_text(json.dumps({"y": 99.0}))

    capsys.readouterr()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert main(["show", str(root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["cells"]
    assert [(c["dir"], c["y"]) for c in shown] == [("a=1", 1.0), ("a=2", None)]
    (message,) = {str(w.message) for w in said}
    assert suspect not in message and repr(str(copy))[1:-1] in message  # escaped

    view = read_sweep(root)  # said once in a process: above
    assert [(c.dir, c.metrics.get("y")) for c in view.cells] == [("a=1", 1.0), ("a=2", None)]
