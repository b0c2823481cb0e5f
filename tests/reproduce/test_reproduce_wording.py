# SPDX-License-Identifier: MIT
"""``reproduce()`` speaks in its own parameters; ``mushin-box reproduce`` in its flags."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GOLDEN

import mushin_box
from mushin_box._reproduce.checks import ReproduceError


@pytest.fixture
def old_cell(tmp_path: Path) -> Path:
    # recorded at an older commit of this checkout: its code check fails, before any run
    shutil.copytree(GOLDEN / "rooms-ii" / "sweep", tmp_path / "sweep")
    return tmp_path / "sweep" / "cell"


def test_the_api_names_its_parameters(old_cell: Path) -> None:
    with pytest.raises(ReproduceError) as caught:
        mushin_box.reproduce(old_cell, local=True, dry_run=True)
    message = str(caught.value)
    assert "allow_dirty=True" in message and "--allow-dirty" not in message


def test_the_command_names_its_flags(old_cell: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "reproduce", str(old_cell), "--local", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "pass --allow-dirty to run anyway" in proc.stderr and "allow_dirty" not in proc.stderr
