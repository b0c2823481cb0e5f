# SPDX-License-Identifier: MIT
"""``report -o`` never writes over what a run produced (issue 29, section 6): a path inside
a cell directory, or over a file that is not an earlier report, is refused in one line
(exit 2, nothing written) unless ``--force``; an earlier report is replaced. And a corrupt
``fit_metrics.json`` is one line, not a traceback (section 7)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_files import lr_sweep

from mushin_box.cli.main import EXIT_USAGE, main


def _report(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["report", *map(str, args)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "inside",
    [
        "lr=0.01/mushin_metrics.json",  # over a cell's metrics
        "lr=0.01/report.html",  # a new file, in a cell directory
        "lr=0.01/ckpt/report.html",  # below one
        ".submitit/report.html",  # under the sweep, where its runs write
    ],
)
def test_an_output_inside_what_a_run_produced_is_refused(
    tmp_path: Path, inside: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    (sweep / "lr=0.01" / "ckpt").mkdir()
    (sweep / ".submitit").mkdir()
    before = {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}
    code, err = _report(capsys, sweep, "-o", sweep / inside)
    assert code == EXIT_USAGE
    assert len(err.strip().splitlines()) == 1 and "--force" in err, err
    after = {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}
    assert after == before  # nothing replaced, nothing added


def test_force_writes_there_anyway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    out = sweep / "lr=0.01" / "report.html"
    assert _report(capsys, sweep, "-o", out, "--force")[0] == 0
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_a_file_that_is_not_a_report_is_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    notes = tmp_path / "notes.html"
    notes.write_text("<!DOCTYPE html><title>my notes</title>")
    code, err = _report(capsys, sweep, "-o", notes)
    assert code == EXIT_USAGE and "is not a report mushin-box wrote" in err
    assert notes.read_text() == "<!DOCTYPE html><title>my notes</title>"
    assert _report(capsys, sweep, "-o", notes, "--force")[0] == 0
    assert "mushin-box" in notes.read_text()


def test_an_earlier_report_is_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    out = tmp_path / "report.html"
    assert _report(capsys, sweep, "-o", out)[0] == 0
    out.write_text(out.read_text().replace("lr=0.01", "lr=OLD"))
    assert _report(capsys, sweep, "-o", out, "--best", "val_loss")[0] == 0
    assert "lr=OLD" not in out.read_text()
    # a page written before the mark was (its title says what wrote it) is one too
    out.write_text("<!DOCTYPE html>\n<html><head><title>mushin-box report: x</title>")
    assert _report(capsys, sweep, "-o", out)[0] == 0


@pytest.mark.parametrize(
    "corrupt",
    [
        '{"epoch": [0, 1], "train_loss": [1.0',
        "[1, 2]",
        '{"epoch": "x", "train_loss": 3}',
        '{"epoch": [0, 1], "train_loss": [1, "a"]}',
    ],
)
def test_a_corrupt_series_file_is_one_line(
    tmp_path: Path, corrupt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    (sweep / "lr=0.01" / "fit_metrics.json").write_text(corrupt)
    code, err = _report(capsys, sweep, "-o", tmp_path / "r.html")
    assert code == EXIT_USAGE
    assert len(err.strip().splitlines()) == 1 and "lr=0.01/fit_metrics.json" in err, err
    assert not (tmp_path / "r.html").exists()
