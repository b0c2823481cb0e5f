# SPDX-License-Identifier: MIT
"""A diff to send to a colleague: ``--md``, ``--html``, ``--brief``, short hashes, readable
cell labels, and a closed pipe that ends quietly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_files import COMMIT, lr_sweep, write_cell, write_manifest

from mushin_box import Workflow, multirun
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box.cli.main import main


def _diff(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    code = main(["diff", *map(str, args)])
    return code, capsys.readouterr().out


def _other_commit(root: Path) -> Path:
    """A copy of ``lr_sweep``'s sweep whose cells ran another commit, with other code (its
    fingerprint: another commit of the same code is no break), and another pid."""
    other = root.parent / f"{root.name}-other"
    shutil.copytree(root, other)
    for record_file in other.glob("*/mushin_provenance.json"):
        record = read_json(record_file)
        record["reproducibility"]["code"]["git"]["commit"] = "9" * 40
        record["reproducibility"]["code"]["task_sha256"] = "d" * 64
        record["run"]["pid"] = 4242
        write_json_atomic(record_file, record)
    return other


def test_md_and_html_shorten_hashes_and_json_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = lr_sweep(tmp_path / "a")
    b = _other_commit(a)
    for flag in ("--md", "--html", None):
        code, out = _diff(capsys, a, b, *([flag] if flag else []))
        assert code == 1
        assert COMMIT[:12] in out and "9" * 12 in out, flag
        assert COMMIT not in out and "9" * 13 not in out, flag
    code, out = _diff(capsys, a, b, "--json")
    paths = {f["path"]: f for c in json.loads(out)["cells"] for f in c["breaks_reproducibility"]}
    assert paths["reproducibility.code.git.commit"]["a"] == COMMIT


def test_md_is_a_markdown_document_verdict_and_metrics_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = lr_sweep(tmp_path / "a")
    code, out = _diff(capsys, a, _other_commit(a), "--md")
    assert out.startswith(
        "## mushin-box diff: ❌ different experiments: reproducibility.code.git.commit "
        "0123456789ab vs 999999999999 (in all 3 cells; and 1 more)"
    )
    assert out.index("### Metrics") < out.index("### Breaks reproducibility (2)")
    assert out.index("### Breaks reproducibility (2)") < out.index("### Expected to differ")
    # one change every cell shares: one row, not one per cell
    assert "| all 3 cells | reproducibility.code.git.commit | 0123456789ab | 999999999999 |" in out
    assert "| all 3 cells | run.pid | 42 | 4242 |" in out


def test_brief_counts_the_expected_differences_and_lists_no_scheduler_bookkeeping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = lr_sweep(tmp_path / "a")
    b = _other_commit(a)
    for record_file in b.glob("*/mushin_provenance.json"):
        record = read_json(record_file)
        record["run"]["env"] = {"OMP_NUM_THREADS": "4"}
        write_json_atomic(record_file, record)
    for flag in ("--md", "--html", None):
        code, out = _diff(capsys, a, b, "--brief", *([flag] if flag else []))
        assert "run.pid" not in out and "run.env" not in out, flag
        assert "Expected to differ: 6 field(s): 3 other, 3 scheduler" in out, flag
        assert "reproducibility.code.git.commit" in out, flag
    _, out = _diff(capsys, a, b, "--brief", "--json")  # --json keeps every row
    assert "run.pid" in out


def test_a_single_run_and_a_missing_cell_have_readable_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one"
    write_manifest(one, {}, [write_cell(one, {}, metrics={"loss": 1.0})])
    two = tmp_path / "two"
    shutil.copytree(one, two)
    _, out = _diff(capsys, one, two, "--md")
    assert "| cell | loss | 1 | 1 |" in out and "{}" not in out  # as show names it
    a = lr_sweep(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    shutil.rmtree(b / "lr=1.0")
    code, out = _diff(capsys, a, b, "--md")
    assert code == 1
    assert "different experiments: 1 cell only in A\n" in out
    assert "\n1 cell only in A: lr=1.0\n" in out and "<cell>" not in out


def test_html_is_one_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = lr_sweep(tmp_path / "a")
    _, out = _diff(capsys, a, _other_commit(a), "--html")
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "src=" not in out and "href=" not in out and "<script" not in out
    assert "different experiments: reproducibility.code.git.commit" in out


@pytest.mark.parametrize("command", ["diff {a} {b} --json", "show {a} --json"])
def test_a_closed_pipe_ends_quietly(tmp_path: Path, command: str) -> None:
    a = lr_sweep(tmp_path / "a")
    b = _other_commit(a)
    # many rows, so the output outgrows the pipe's buffer after head has gone
    for record_file in b.glob("*/mushin_provenance.json"):
        record = read_json(record_file)
        record["run"]["env"] = {f"VAR_{i}": "x" * 200 for i in range(400)}
        write_json_atomic(record_file, record)
    line = (
        f"{sys.executable} -m mushin_box {command.format(a=a, b=b)} | head -n 1; "
        "echo status=${PIPESTATUS[0]}"
    )
    proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[0] == "{"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    # its answer when the output fit in the pipe before head left; else 141, as for SIGPIPE
    assert proc.stdout.strip().endswith(("status=0", "status=1", "status=141"))


def _env_task(lr: float) -> dict[str, float]:
    """Sets what a Lightning fit sets in the environment of its process."""
    import pytorch_lightning as pl

    pl.seed_everything(3)
    os.environ["OMP_NUM_THREADS"] = "1"
    return {"loss": lr}


def test_two_identical_runs_in_one_process_have_no_env_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b"):
        Workflow(_env_task).run(working_dir=tmp_path / name, progress=False, lr=multirun([0.1]))
    code, out = _diff(capsys, tmp_path / "a", tmp_path / "b", "--md")
    assert code == 0
    assert "run.env" not in out, out
