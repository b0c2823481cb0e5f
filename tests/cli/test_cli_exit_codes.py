# SPDX-License-Identifier: MIT
"""Exit codes that mean one thing, and no traceback where the output goes (issue 29,
section 7): a full disk is an error (2), never "differ" (1); a closed pipe ends quietly
(141, as for a command SIGPIPE ended); every float flag refuses nan, inf and what would
overflow; every ``--help`` says what its codes mean; ``--json`` is strict JSON; a
``--where state=`` that names no state says so."""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sweep_files import lr_sweep, write_cell, write_manifest

from mushin_box.cli.main import COMMANDS, EXIT_CLOSED_PIPE, EXIT_USAGE, main

READERS = ["show {a}", "status {a}", "diff {a} {a}", "show {a} --json", "status {a} --json"]


def _cli(command: str, sweep: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    argv = command.format(a=sweep).split()
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *argv],
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
        **kwargs,
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("command", READERS)
def test_a_full_disk_is_an_error_in_one_line(tmp_path: Path, command: str) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    with open("/dev/full", "w") as full:
        proc = _cli(command, sweep, stdout=full, stderr=subprocess.PIPE)
    # diff of a sweep with itself would exit 0; 1 would say "they differ"
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "cannot write the output (No space left on device)" in lines[0]


@pytest.mark.parametrize("command", READERS)
def test_a_closed_pipe_ends_quietly_with_its_own_code(tmp_path: Path, command: str) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    read, write = os.pipe()
    os.close(read)  # the reader went away before a byte was written: `| head -0`
    try:
        proc = _cli(command, sweep, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert proc.returncode == EXIT_CLOSED_PIPE, proc.stderr
    assert proc.stderr == "", proc.stderr


FLOAT_FLAGS = [
    ("wait", "--interval"),
    ("wait", "--timeout"),
    ("cancel", "--grace"),
    ("smoke", "--timeout"),
]
#: tolerances are checked by the comparison itself, for the Python API too (finite, >= 0:
#: tests/cli/test_cli_diff.py), so they stay plain floats here
_CHECKED_BY_THE_LIBRARY = {"main.py": 1}  # --atol and --rtol (one loop): diff, reproduce
_POSITIONALS = {
    "wait": ["d"],
    "cancel": ["d"],
    "smoke": ["--image", "x.sif"],
}


@pytest.mark.parametrize(("command", "flag"), FLOAT_FLAGS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "-1", "ten"])
def test_every_float_flag_takes_a_finite_number_in_range(
    command: str, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, *_POSITIONALS[command], f"{flag}={value}"])
    assert exit_.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}: {value!r} is not a " in err and "Traceback" not in err


def test_every_float_flag_is_checked() -> None:
    """A new ``type=float`` flag would skip the check: there is none left."""
    cli = Path(importlib.import_module("mushin_box.cli").__file__ or "").parent
    found = {p.name: p.read_text().count("type=float") for p in cli.glob("*.py")}
    assert {k: n for k, n in found.items() if n} == _CHECKED_BY_THE_LIBRARY


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_says_what_its_exit_codes_mean(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    codes = text[text.index("exit codes:") : text.index("examples:")]
    assert "  0 " in codes and "  2 " in codes and "  141 " in codes
    module = importlib.import_module(f"mushin_box.cli.{command}")
    for code in module.EXITS:
        assert f"  {code} " in codes, codes


def _nan_sweep(root: Path) -> Path:
    cells = [
        write_cell(root, {"a": a}, metrics={"loss": v, "acc": -v})
        for a, v in ((1, math.nan), (2, math.inf))
    ]
    write_manifest(root, {"a": [1, 2]}, cells)
    return root


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"bare {constant} in --json output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", ["show", "status", "ls"])
def test_json_is_strict_json(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = _nan_sweep(tmp_path / "sweep")
    main([command, str(sweep if command != "ls" else tmp_path), "--json"])
    data = _strict(capsys.readouterr().out)
    if command == "show":
        assert [c["loss"] for c in data["cells"]] == ["nan", "inf"]


def test_where_an_unknown_state_lists_the_states(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = lr_sweep(tmp_path / "sweep")
    assert main(["show", str(sweep), "--where", "state=exploded"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "'exploded' is not a cell state" in err and "unknown, completed, failed" in err
    assert main(["show", str(sweep), "--where", "state=failed"]) == 0
    assert "diverged" in capsys.readouterr().out
