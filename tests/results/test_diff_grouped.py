# SPDX-License-Identifier: MIT
"""``diff`` of two sweeps says a break that every cell shares once, with how many cells share
it, and counts the cells only one side has in one line per side (issue 43, item 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sweep_files import write_cell, write_manifest

from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._results.diff import diff_html, diff_markdown, diff_provenance
from mushin_box.cli.main import main


def _sweep(root: Path, lrs: list[float], config: dict[str, Any]) -> Path:
    """A sweep over ``lr`` × ``wd`` (0, 1, 2) whose every cell's config also holds
    ``config`` (a value neither sweep sweeps)."""
    cells = [write_cell(root, {"lr": lr, "wd": wd}, metrics={"loss": 1.0}) for lr in lrs
             for wd in (0, 1, 2)]  # fmt: skip
    for cell in cells:
        record = read_json(cell / "mushin_provenance.json")
        record["reproducibility"]["config"].update(config)
        write_json_atomic(cell / "mushin_provenance.json", record)
    write_manifest(root, {"lr": lrs, "wd": [0, 1, 2]}, cells)
    return root


def _terminal(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["diff", str(a), str(b)])
    return code, capsys.readouterr().out  # piped: a line per row


def test_a_break_every_cell_shares_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _sweep(tmp_path / "a", [0.1, 0.2, 0.3], {"x": 1})
    b = _sweep(tmp_path / "b", [0.1, 0.2, 0.3], {"x": 2})
    diff = diff_provenance(a, b)
    assert (
        diff.verdict() == "different experiments: reproducibility.config.x 1 vs 2 (in all 9 cells)"
    )
    md = diff_markdown(diff)
    assert "### Breaks reproducibility (1)" in md
    assert (
        "| all 9 cells | reproducibility.config.x | 1 | 2 |" in md
        and "| lr=0.1,wd=0 | repro" not in md
    )
    html = diff_html(diff)
    assert "<td>all 9 cells</td><td><code>reproducibility.config.x</code></td>" in html
    code, out = _terminal(capsys, a, b)
    assert code == 1
    assert "Breaks reproducibility (1)\n  all 9 cells: reproducibility.config.x: 1 -> 2\n" in out
    assert main(["diff", str(a), str(b), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert sum(len(c["breaks_reproducibility"]) for c in data["cells"]) == 9  # the data: per cell


def test_a_break_some_cells_share_names_them_and_other_breaks_are_more(tmp_path: Path) -> None:
    a = _sweep(tmp_path / "a", [0.1, 0.2, 0.3], {"x": 1, "y": 1})
    b = _sweep(tmp_path / "b", [0.1, 0.2, 0.3], {"x": 2, "y": 1})
    for wd in (1, 2):  # y differs in 2 of the 9 cells only
        record_file = b / f"lr=0.1,wd={wd}" / "mushin_provenance.json"
        record = read_json(record_file)
        record["reproducibility"]["config"]["y"] = 5
        write_json_atomic(record_file, record)
    diff = diff_provenance(a, b)
    assert diff.verdict() == (
        "different experiments: reproducibility.config.x 1 vs 2 (in all 9 cells; and 1 more)"
    )
    md = diff_markdown(diff)
    assert "### Breaks reproducibility (2)" in md
    assert "| lr=0.1,wd=1; lr=0.1,wd=2 | reproducibility.config.y | 1 | 5 |" in md


def test_two_grids_count_the_cells_one_side_has_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _sweep(tmp_path / "a", [0.1], {})
    b = _sweep(tmp_path / "b", [0.1, 0.2, 0.3, 0.4], {})
    diff = diff_provenance(a, b)
    assert diff.verdict() == "different experiments: 9 cells only in B"
    line = "9 cells only in B: lr=0.2,wd=0; lr=0.2,wd=1; lr=0.2,wd=2; lr=0.3,wd=0 (and 5 more)"
    for out in (diff_markdown(diff), diff_html(diff), _terminal(capsys, a, b)[1]):
        assert line in out
        assert "(the whole cell)" not in out and "present" not in out
    assert "### Breaks reproducibility (1)" in diff_markdown(diff)
    assert len(diff_provenance(a, b).cells) == 12  # --json keeps a cell per row


def test_a_break_and_cells_one_side_has_are_both_in_the_verdict(tmp_path: Path) -> None:
    a = _sweep(tmp_path / "a", [0.1, 0.5], {"x": 1})
    b = _sweep(tmp_path / "b", [0.1, 0.2], {"x": 2})
    assert diff_provenance(a, b).verdict() == (
        "different experiments: reproducibility.config.x 1 vs 2 (in all 3 cells); "
        "3 cells only in A; 3 cells only in B"
    )


def _world(cell: Path, ranks: int, nodes: int, config: dict[str, Any]) -> None:
    """``cell``'s record as a run of ``ranks`` ranks on ``nodes`` SLURM nodes would write it:
    a scheduler variable per SLURM setting, the launcher's settings, a row per rank."""
    record = read_json(cell / "mushin_provenance.json")
    run = record.setdefault("run", {})
    run["env"] = {f"SLURM_{k}": str(v) for k, v in enumerate(range(ranks * 3))} if ranks > 1 else {}
    run["launcher"] = {"nodes": nodes, "config": {f"k{i}": i for i in range(ranks * 2)}}
    run["topology"] = {"world_size": ranks, "ranks": [[r, r % 4] for r in range(ranks)]}
    record["reproducibility"]["config"].update(config)
    write_json_atomic(cell / "mushin_provenance.json", record)


def test_a_big_worlds_expected_fields_come_by_family_and_breaks_never_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """64 ranks against 1: the scheduler's 192 variables, the launcher's settings and the
    rank rows are one row each, counted; the world size stays its own row; and what
    breaks reproducibility is listed path by path, however many paths share a parent."""
    one = write_cell(tmp_path / "one", {}, metrics={"loss": 1.0})
    big = write_cell(tmp_path / "big", {}, metrics={"loss": 1.0})
    _world(one, 1, 1, {f"p{i}": 0 for i in range(12)})
    _world(big, 64, 16, {f"p{i}": 1 for i in range(12)})
    code, out = _terminal(capsys, one, big)
    assert code == 1
    expected = out[out.index("Expected to differ") :]
    assert "  run.env.* (192 fields): (absent) -> 192 set\n" in expected
    assert "  run.launcher.config.* (126 fields): (absent) -> 126 set\n" in expected
    assert "  run.topology.ranks[*] (63 rows): … -> …\n" in expected  # rank 0 is alike
    assert "  run.topology.world_size: 1 -> 64\n" in expected
    assert "  run.launcher.nodes: 1 -> 16\n" in expected
    assert len(expected.splitlines()) < 10  # a screen, not 380 rows
    breaks = out[out.index("Breaks reproducibility") : out.index("Expected to differ")]
    assert all(f"reproducibility.config.p{i}: 0 -> 1" in breaks for i in range(12))
    md = diff_markdown(diff_provenance(one, big))
    assert "| run.env.\\* (192 fields) | (absent) | 192 set |" in md
