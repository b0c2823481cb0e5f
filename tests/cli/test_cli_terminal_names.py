# SPDX-License-Identifier: MIT
"""A name from a sweep directory cannot forge a line or colour the terminal (issue 42,
item 3): a copied cell named ``lr=1.0\\nFAKE completed lr=99`` or ``..\\x1b[31mred`` is
printed with its control characters escaped (``\\n``, ``\\x1b``), by every command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from workflow_tasks import one_failed_sweep

from mushin_box._core.layout import STATUS_FILE
from mushin_box.cli.main import main

FORGED = "lr=1.0,seed=1\nFAKE completed lr=99"
COLOURED = "..\x1b[31mred"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished sweep (one cell failed), its cells copied under hostile names, one with a
    status whose values and error hold them too, and the sweep copied under a coloured
    name."""
    root = one_failed_sweep(tmp_path_factory.mktemp("names") / "sweep")
    shutil.copytree(root / "lr=1.0,seed=1", root / FORGED)
    shutil.copytree(root / "lr=0.1,seed=0", root / COLOURED)
    status = root / COLOURED / STATUS_FILE
    record = json.loads(status.read_text())
    record["combo"]["lr"] = f"{COLOURED}\nFAKE"
    record.update(status="failed", error_type="E", error_message=f"{COLOURED}\nFAKE line")
    status.write_text(json.dumps(record))
    shutil.copytree(root, root.parent / f"all{COLOURED}")
    return root


def _printed(capsys: pytest.CaptureFixture[str], *argv: str, code: int | None = None) -> str:
    capsys.readouterr()
    assert main(list(argv)) == code or code is None
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert "\x1b" not in both, both
    assert not any(line.startswith("FAKE") for line in both.splitlines()), both
    return both


@pytest.mark.parametrize(
    "argv",
    [
        ["wait", "{root}", "--no-progress", "--interval", "1"],
        ["cancel", "{root}"],
        ["status", "{root}"],
        ["show", "{root}"],
        ["logs", "{root}"],
        ["ls", "{parent}"],
    ],
    ids=lambda argv: argv[0],
)
def test_no_command_prints_a_name_raw(
    hostile: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    where = {"root": str(hostile), "parent": str(hostile.parent)}
    _printed(capsys, *(a.format(**where) for a in argv))


def test_a_hostile_name_is_shown_escaped(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a copy under a name no cell has is a suspect, not read (tests/sweepdir/test_suspect_names)
    assert "FAKE" not in _printed(capsys, "cancel", str(hostile))
    assert "..\\x1b[31mred" in _printed(capsys, "logs", str(hostile))
    # the cell named so is still found by its real name
    _printed(capsys, "logs", str(hostile), COLOURED, code=0)
