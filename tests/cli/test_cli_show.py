# SPDX-License-Identifier: MIT
"""``mushin-box show``: filters, order, the best cell, and its exports (CSV, Markdown, JSON).
The README's sweep is in tests/cli/test_cli_results.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from sweep_files import lr_sweep

from mushin_box.cli.main import main


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    return lr_sweep(tmp_path)


def _show(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main(["show", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_csv_has_a_row_per_cell_at_full_precision(
    sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _show(capsys, sweep, "--csv", "--best", "acc:max")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["dir"] for r in rows] == ["lr=0.01", "lr=0.1", "lr=1.0"]
    assert list(rows[0]) == ["dir", "lr", "state", "acc", "val_loss", "error", "best"]
    assert [r["best"] for r in rows] == ["False", "True", "False"]
    assert rows[2]["state"] == "failed" and "diverged" in rows[2]["error"]
    assert rows[2]["val_loss"] == ""


def test_md_marks_the_best_cell(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _show(capsys, sweep, "--md", "--best", "val_loss")
    lines = out.splitlines()
    assert lines[0] == "|   | lr | state | acc | val\\_loss | error |"
    assert "| ★ | 0.1 | completed | 0.8 | 0.2 |   |" in lines
    assert lines[-1] == "★ best val_loss (lowest): lr=0.1 = 0.2"


def test_where_and_sort(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = _show(capsys, sweep, "--json", "--where", "lr=0.1,1.0", "--sort", "val_loss")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=0.1", "lr=1.0"]  # NaN last
    _, out, _ = _show(capsys, sweep, "--json", "--where", "state=failed")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=1.0"]
    _, out, _ = _show(capsys, sweep, "--json", "--sort", "acc:desc")
    assert [c["dir"] for c in json.loads(out)["cells"]] == ["lr=0.1", "lr=0.01", "lr=1.0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--best", "loss"], "no cell has a scalar metric 'loss'; the metrics are: acc, val_loss"),
        (["--where", "seed=1"], "'seed' is not a swept parameter of this sweep; use one of: lr"),
        (["--where", "lr"], "expected KEY=VALUE"),
        (["--sort", "nope:desc"], "--sort 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    sweep: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _show(capsys, sweep, *args)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_the_table_names_the_best_cell(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _show(capsys, sweep, "--best", "val_loss")
    assert code == 0
    assert "2 completed, 1 failed" in out
    assert "★ best val_loss (lowest): lr=0.1 = 0.2" in out
