# SPDX-License-Identifier: MIT
"""A cell's metrics file holds at most ``METRIC_KEYS_BOUND`` keys (issue 42, case 5): past
it, every reader (status, show, report, diff, load_experiment) stops with one line naming
the file and exit 2, at about the cost of parsing the file once, instead of building a
table of a column per key (10**6 keys, 20 MB, within the byte limit: ``status`` 57 s and
1.8 GB, ``show`` more than 120 s)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box import UnsafeFileError, load_experiment
from mushin_box._sweepdir.board import METRIC_KEYS_BOUND
from mushin_box.cli.main import main


def _sweep(root: Path, keys: int) -> Path:
    cells = [write_cell(root, {"a": 1}, metrics={}), write_cell(root, {"a": 2}, metrics={"l": 1})]
    many = {f"m{i:07d}": float(i) for i in range(keys)}
    (cells[0] / "mushin_metrics.json").write_text(json.dumps(many))
    write_manifest(root, {"a": [1, 2]}, cells)
    return root


@pytest.fixture(scope="module")
def past_bound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _sweep(tmp_path_factory.mktemp("keys") / "sweep", METRIC_KEYS_BOUND + 1)


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()  # stdout: at most the sweep's heading
    assert len(lines) == 1, lines
    assert "mushin_metrics.json: " in lines[0], lines
    assert "metric keys, over the bound of 10,000" in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("command", ["status", "show", "report", "diff"])
def test_a_metrics_file_past_the_bound_is_one_line_and_exit_2(
    past_bound: Path, command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = {
        "status": ["status", str(past_bound)],
        "show": ["show", str(past_bound)],
        "report": ["report", str(past_bound), "-o", str(tmp_path / "r.html")],
        "diff": ["diff", str(past_bound / "a=1"), str(past_bound / "a=2")],
    }[command]
    assert f"{METRIC_KEYS_BOUND + 1:,} metric keys" in _one_line(capsys, argv)
    assert not (tmp_path / "r.html").exists()


def test_load_experiment_refuses_it_too(past_bound: Path) -> None:
    with pytest.raises(UnsafeFileError, match="metric keys, over the bound"):
        load_experiment(past_bound)


def test_the_bound_itself_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _sweep(tmp_path / "sweep", METRIC_KEYS_BOUND)
    assert main(["show", str(root), "--json"]) == 0
    shown = capsys.readouterr().out
    assert f"m{METRIC_KEYS_BOUND - 1:07d}" in shown


def test_a_million_keys_cost_about_one_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10**6 keys (20 MB): ``status`` stops within a few times the file's own parse."""
    root = _sweep(tmp_path / "sweep", 10**6)
    metrics = root / "a=1" / "mushin_metrics.json"
    start = time.perf_counter()
    json.loads(metrics.read_bytes())
    parse = time.perf_counter() - start
    start = time.perf_counter()
    line = _one_line(capsys, ["status", str(root)])
    took = time.perf_counter() - start
    assert "1,000,000 metric keys" in line
    assert took < 6 * parse + 1.0, (took, parse)
