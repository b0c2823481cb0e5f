# SPDX-License-Identifier: MIT
"""A pyproject.toml nested too deeply for the TOML parser (a 1000-deep array anywhere in
it) costs one line, not a traceback (issue 42, item 4): the project's secret-name reader
parses it before any command runs, and the profile reader parses it for a launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mushin_box._core.layout import SECRET_NAMES_ENV
from mushin_box._core.redact import is_secret_name
from mushin_box._launch.options import load_profile

DEEP = "[tool.other]\nx = " + "[" * 1000 + "]" * 1000 + "\n"


@pytest.fixture
def deep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(SECRET_NAMES_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text(DEEP)
    return tmp_path


def test_the_secret_name_reader_refuses_it_in_one_line(
    deep: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(deep)
    with pytest.raises(ValueError, match="nested too deeply") as refused:
        is_secret_name("lr")
    assert str(deep / "pyproject.toml") in str(refused.value)
    assert "\n" not in str(refused.value)


def test_the_profile_reader_refuses_it_in_one_line(deep: Path) -> None:
    with pytest.raises(ValueError, match="nested too deeply") as refused:
        load_profile(None, deep)
    assert str(deep / "pyproject.toml") in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("args", [["--version"], ["ls"]])
def test_every_command_still_runs_with_one_warning(deep: Path, args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=deep,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr
    warning = [line for line in proc.stderr.splitlines() if "nested too deeply" in line]
    assert len(warning) == 1 and str(deep / "pyproject.toml") in warning[0], proc.stderr
