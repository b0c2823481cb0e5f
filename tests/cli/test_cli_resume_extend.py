# SPDX-License-Identifier: MIT
"""``resume DIR --set trainer.max_epochs=N`` trains a finished cell on from its checkpoint
(issue 43, item 2).

A cell fitted for 2 epochs and extended to 3 ends with the results of a cell fitted for 3
epochs from the start, bit for bit: the extension continued the same fit, and did not
start again. The attempt says it extended the fit (from 2 to 3), ``diff`` against the 2-epoch
run puts ``max_epochs`` under a heading of its own, and a limit below what the cell trained
is refused in one line with nothing changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from mushin_box._core.sidecars import read_json
from mushin_box.cli.main import main


def _box(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.slow
def test_a_finished_fit_extended_to_more_epochs_equals_the_longer_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    shutil.copy(REPO / "examples" / "exp.py", tmp_path / "exp.py")
    for name, epochs in (("short", 2), ("long", 3)):
        run = _box(
            *("launch", "exp.py", f"trainer.max_epochs={epochs}", "--working-dir", name),
            *("--local", "--no-progress"),  # here, even where a SLURM cluster answers
            cwd=tmp_path,
        )
        assert run.returncode == 0, run.stderr[-3000:]
    shutil.copytree(tmp_path / "short", tmp_path / "before")  # the 2-epoch run, kept
    review = _box("resume", "short", "--set", "trainer.max_epochs=3", "--dry-run", cwd=tmp_path)
    assert "completed  extend: to trainer.max_epochs=3" in review.stdout, review.stdout

    extended = _box(
        "resume", "short", "--set", "trainer.max_epochs=3", "--no-progress", cwd=tmp_path
    )
    assert extended.returncode == 0, extended.stderr[-3000:]
    assert "Restored all states from the checkpoint" in extended.stderr  # not from scratch
    status = read_json(tmp_path / "short" / "cell" / "mushin_status.json")
    assert (status["status"], status["attempt"]) == ("completed", 2)
    assert status["extended"] == {"trainer.max_epochs": [2, 3]}
    attempts = read_json(tmp_path / "short" / "cell" / "mushin_provenance.json")["run"]["attempts"]
    assert [(a["attempt"], a["epoch"], a.get("extended")) for a in attempts] == [
        (1, 0, None),
        (2, 2, {"trainer.max_epochs": [2, 3]}),
    ]

    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["diff", "long", "short"]) == 0
    same = capsys.readouterr().out
    assert same.startswith("same experiment, same results"), same

    assert main(["diff", "before", "short"]) == 1
    longer = capsys.readouterr().out
    assert longer.startswith(
        "same experiment trained to another limit (trainer.max_epochs 2 vs 3), results differ"
    ), longer
    section = longer.split("Training limits, changed on purpose (1)\n", 1)[1]
    assert section.split("\n")[0].endswith("reproducibility.config.trainer.max_epochs: 2 -> 3")
    assert "Breaks reproducibility: nothing" in longer

    before = (tmp_path / "short" / "cell" / "mushin_status.json").read_bytes()
    lowered = _box("resume", "short", "--set", "trainer.max_epochs=1", cwd=tmp_path)
    assert lowered.returncode == 2 and lowered.stdout == ""
    assert lowered.stderr.count("\n") == 1, lowered.stderr
    assert "trainer.max_epochs=1 is below the 3 epochs cell cell already trained" in lowered.stderr
    assert "give at least 3" in lowered.stderr
    assert (tmp_path / "short" / "cell" / "mushin_status.json").read_bytes() == before
