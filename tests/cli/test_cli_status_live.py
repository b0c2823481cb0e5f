# SPDX-License-Identifier: MIT
"""``mushin-box status`` of a sweep in progress: a running cell's latest epoch and metric,
and a table that stays readable at 80 columns, piped or on a terminal (no word cut, no
empty column, an error on one line with its file)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mushin_box._core.sidecars import canonical_dumps, write_json_atomic
from mushin_box.cli.main import main

# a process that takes over a cell as the project's own runner records it, then stays
_OWN_CELL = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mushin_box._core.sidecars import read_json, write_json_atomic
    from mushin_box._sweepdir.liveness import owner_fields
    status = Path(sys.argv[1])
    record = {"combo": {"module.hidden_size": 256, "optimizer.lr": 0.1}, "attempt": 1,
              "status": "running", "started": "2026-01-01T00:00:00+00:00"}
    write_json_atomic(status, {**record, **owner_fields()})
    print("ready", flush=True)
    time.sleep(600)
    """
)
_PARAMS = ("module.hidden_size", "optimizer.lr")
_ERROR = (
    "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity;\n"
    "76.80 GiB already allocated; 1.25 GiB free) If reserved memory is >> allocated memory "
    "try setting max_split_size_mb to avoid fragmentation"
)


def _name(hidden: int, lr: float) -> str:
    return f"module.hidden_size={hidden},optimizer.lr={lr}"


def _status(root: Path, hidden: int, lr: float, **record: object) -> Path:
    cell = root / _name(hidden, lr)
    combo = {"module.hidden_size": hidden, "optimizer.lr": lr}
    write_json_atomic(cell / "mushin_status.json", {"combo": combo, "attempt": 1, **record})
    return cell


def _finished_sweep(root: Path, failed: bool = True) -> None:
    """Four cells: three completed with three metrics, one failed with a long error."""
    grid = {"module.hidden_size": [64, 256], "optimizer.lr": [0.001, 0.1]}
    write_json_atomic(root / "mushin_sweep.json", {"grid": grid, "params": list(_PARAMS)})
    done = {"started": "2026-01-01T00:00:00+00:00", "duration_s": 250.0, "host": "gpu-node-17"}
    for hidden, lr in ((64, 0.001), (64, 0.1), (256, 0.001)):
        cell = _status(root, hidden, lr, status="completed", slurm_job_id="4242_0", **done)
        metrics = {"train_loss": 0.41, "val_accuracy": 0.5877, "val_loss": 0.3871}
        write_json_atomic(cell / "mushin_metrics.json", metrics)
    if failed:
        error = {"type": "torch.OutOfMemoryError", "message": _ERROR, "file": "mushin_error.txt"}
        cell = _status(root, 256, 0.1, status="failed", error=error, **done)
        (cell / "mushin_error.txt").write_text(f"Traceback ...\ntorch.OutOfMemoryError: {_ERROR}")
    else:
        _status(root, 256, 0.1, status="completed", **done)


@pytest.fixture
def running_sweep(tmp_path: Path) -> Iterator[Path]:
    """A sweep whose cell (256, 0.1) is running: its owner process lives, and its
    MetricsCallback series holds 4 epochs (the first metric's last epoch not logged)."""
    root = tmp_path / "sweep"
    _finished_sweep(root)
    cell = root / _name(256, 0.1)
    for name in ("mushin_status.json", "mushin_error.txt"):
        (cell / name).unlink()
    series = {
        "epoch": [0, 1, 2, 3],
        "a_loss": [0.9, 0.7, 0.61, float("nan")],  # NaN: not logged in the last round
        "val_loss": [0.8, 0.6, 0.5, 0.4567],
    }
    (cell / "fit_metrics.json").write_bytes(canonical_dumps(series))
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWN_CELL, str(cell / "mushin_status.json")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        yield root
    finally:
        owner.kill()
        owner.wait(timeout=30)


def _json(root: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    code = main(["status", str(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["exit_code"] == code
    return data


def test_a_running_cell_shows_its_latest_epoch_and_first_metric(
    running_sweep: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _json(running_sweep, capsys)
    running = [c for c in data["cells"] if c["state"] == "running"]  # type: ignore[union-attr]
    assert len(running) == 1 and data["exit_code"] == 3
    # the first metric by name, at the last epoch that logged it
    cell = running[0]
    assert (cell["epoch"], cell["metric"], cell["metric_value"]) == (3, "a_loss", 0.61)
    assert all(c["epoch"] is None for c in data["cells"] if c is not cell)  # type: ignore[union-attr]

    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    main(["status", str(running_sweep)])
    row = next(line for line in capsys.readouterr().out.splitlines() if " running " in line)
    assert "epoch 3 a_loss 0.61" in row


def test_a_symlinked_series_is_not_read(
    running_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    series = running_sweep / _name(256, 0.1) / "fit_metrics.json"
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(series.read_bytes())
    series.unlink()
    series.symlink_to(outside)
    data = _json(running_sweep, capsys)
    running = [c for c in data["cells"] if c["state"] == "running"]  # type: ignore[union-attr]
    assert running[0]["epoch"] is None and running[0]["metric"] is None


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _check_80(out: str, root: Path) -> None:
    """No line of the table over 80 columns, no header or state cut, every ``…`` after a
    whole word of the error, the error on its cell's line and its file on the next."""
    lines = _plain(out).splitlines()
    header = lines[1].split()
    assert header[:3] == ["hidden_size", "lr", "state"]  # dotted prefixes dropped, not cut
    table = lines[1 : 1 + 1 + 4]
    assert all(len(line) <= 80 for line in table), table
    assert [line.split()[2] for line in table[1:]] == ["completed"] * 3 + ["failed"]
    assert not any(name.endswith("…") for name in header)
    error_at = next(i for i, line in enumerate(lines) if line.startswith(_name(256, 0.1)))
    said = lines[error_at].split(": ", 1)[1]
    assert len(lines[error_at]) <= 80 and said.endswith("…")
    full = "torch.OutOfMemoryError: " + " ".join(_ERROR.split())
    kept = said[:-1]
    assert full.startswith(kept) and (full[len(kept)] == " " or kept[-1] in " /:,;.=()")
    assert lines[error_at + 1].strip() == f"(see {root / _name(256, 0.1) / 'mushin_error.txt'})"
    if any("left out" in line for line in lines):
        note = next(line for line in lines if "left out" in line)
        assert len(note) <= 80 and "--json" in note


def test_80_columns_piped_cut_no_word_and_show_the_error_with_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _finished_sweep(tmp_path / "sweep")
    monkeypatch.setenv("COLUMNS", "80")
    capsys.readouterr()
    assert main(["status", str(tmp_path / "sweep")]) == 1
    _check_80(capsys.readouterr().out, tmp_path / "sweep")


def test_80_columns_on_a_terminal_is_the_same_table(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    _finished_sweep(root)
    env = {**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    done = subprocess.run(
        [sys.executable, "-m", "mushin_box", "status", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "\x1b[" in done.stdout  # it did draw for a terminal
    _check_80(done.stdout, root)


def test_piped_without_a_width_nothing_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sweep"
    _finished_sweep(root)
    monkeypatch.delenv("COLUMNS", raising=False)
    capsys.readouterr()
    main(["status", str(root)])
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    assert header[:2] == list(_PARAMS) and header[-4:] == [
        "train_loss",
        "val_accuracy",
        "val_loss",
        "error",
    ]
    assert {"attempt", "job", "node", "duration"} <= set(header)
    assert not any("left out" in line for line in lines)


@pytest.mark.parametrize("columns", ["80", "300"])
def test_no_error_column_when_no_cell_has_an_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: str,
) -> None:
    root = tmp_path / "sweep"
    _finished_sweep(root, failed=False)
    monkeypatch.setenv("COLUMNS", columns)
    capsys.readouterr()
    assert main(["status", str(root)]) == 0
    header = capsys.readouterr().out.splitlines()[1].split()
    assert "error" not in header and "detail" not in header  # no cell has one
    assert "val_loss" in header or columns == "80"
