# SPDX-License-Identifier: MIT
"""``mushin-box reproduce CELL``: exit 0 reproduced, 1 something differs, 2 bad input."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mushin_box import Workflow, multirun
from mushin_box._core.layout import PROVENANCE_FILE
from mushin_box._core.secrets import SecretVault
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box.cli.main import main

SOURCE = """
def task(lr: float, seed: int = 0, db_password: str = "", word: str = "") -> dict:
    return {"loss": lr * (seed + 1) + len(db_password or word)}
"""
VAR = SecretVault.env_name("db_password")


def _cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: bool = True) -> tuple[Path, Any]:
    code = tmp_path / "code"
    code.mkdir()
    name = f"clitask_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(code))
    module = importlib.import_module(name)
    given = {"db_password": "pw12"} if secret else {"word": "pw12"}
    Workflow(module.task).run(
        working_dir=tmp_path / "sweep", progress=False, lr=multirun([0.5]), **given
    )
    return tmp_path / "sweep" / "lr=0.5", module


def test_reproduced_exit_0_then_changed_code_exit_2_then_allow_dirty_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, module = _cell(tmp_path, monkeypatch, secret=False)
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "Breaks reproducibility: nothing" in out and out.rstrip().endswith("reproduced")

    path = Path(module.__file__)
    path.write_text(path.read_text().replace("+ len(db_password", "+ 2 * len(db_password"))
    monkeypatch.delitem(sys.modules, module.__name__)  # as a new process: the edited code
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "code fingerprint" in err and "--allow-dirty" in err
    assert not (tmp_path / "b").exists()

    argv = ["reproduce", str(cell), "--into", str(tmp_path / "b"), "--allow-dirty"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "reproducibility.code.task_sha256" in out
    assert "loss: 4.5 -> 8.5  DIFFER" in out
    assert "not reproduced: the reproducibility parts differ; metrics differ beyond --atol" in out
    assert "different experiments: reproducibility.code.task_sha256" in out  # diff's verdict
    assert main([*argv[:3], str(tmp_path / "c"), "--allow-dirty", "--atol", "5"]) == 1
    assert "metrics differ" not in capsys.readouterr().out  # within --atol 5


def test_changed_code_gets_no_secrets_even_with_allow_dirty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, module = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    path = Path(module.__file__)
    path.write_text(path.read_text() + "\n# edited after the run\n")
    monkeypatch.delitem(sys.modules, module.__name__)
    argv = ["reproduce", str(cell), "--into", str(tmp_path / "b"), "--allow-dirty"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and VAR in err and "only to the code that ran" in err
    assert "pw12" not in err and not (tmp_path / "b").exists()


def test_bad_input_exit_2_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, _ = _cell(tmp_path, monkeypatch)
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and VAR in err and "'db_password'" in err
    assert main(["reproduce", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    monkeypatch.setenv(VAR, "pw12")
    assert main(["reproduce", str(cell), "--local", "--gpus", "2", "--into", "x"]) == 2
    err = capsys.readouterr().err  # plan_launch's refusal: 2 ranks need a trainer node
    assert err.count("\n") == 1 and "2 ranks requested" in err
    assert not (tmp_path / "a").exists() and not Path("x").exists()


def test_dry_run_prints_the_plan_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cell, module = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    for line in (
        f"task      {module.__name__}:task",
        "swept     lr=0.5",
        "topology  1 node(s) x 1 rank(s)",
        "launcher  local: basic (in-process)  (recorded basic)",
        "image     none (the cell ran in no image)",
        "code      same: fingerprint ",
        f"env       reads {VAR} (set; values not shown)",
        "command   Workflow(",
        f"  db_password: ${{oc.env:{VAR}}}",
    ):
        assert line in out, line
    assert "pw12" not in out
    assert not (tmp_path / "a").exists()


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_json_is_strict_when_a_metric_is_nan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    name = f"nantask_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(
        "def task(x: int = 1) -> dict:\n    return {'loss': float('nan'), 'x': x}\n"
    )
    monkeypatch.syspath_prepend(str(code))
    Workflow(importlib.import_module(name).task).run(
        working_dir=tmp_path / "sweep", progress=False, x=multirun([1])
    )
    argv = ["reproduce", str(tmp_path / "sweep" / "x=1"), "--into", str(tmp_path / "a"), "--json"]
    assert main(argv) == 0  # NaN reproduces NaN
    text = capsys.readouterr().out
    # in-process only: Hydra's log handler from the first run still writes to pytest's
    # stdout (a fresh `mushin-box reproduce --json` process sends Hydra's log to stderr)
    out = _strict_json(text[text.index("{\n") :])
    assert out["ok"] is True
    (metric,) = [m for c in out["diff"]["cells"] for m in c["metrics"] if m["name"] == "loss"]
    assert metric["a"] == metric["b"] == "nan"  # as `mushin-box diff --json` writes it


def _fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``sbatch`` on PATH that is never run (a dry run submits nothing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch must not run' >&2\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_a_cell_run_in_an_image_gets_its_binds_and_image_python_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The launch's --bind and --image-python come back from the recorded rank command:
    the re-run's rank command carries them (a dry run shows it; SLURM: tests/slurm)."""
    from conftest import standin_image

    from mushin_box._image.sif import file_sha256

    cell, _ = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    _fake_sbatch(tmp_path, monkeypatch)
    (tmp_path / "images").mkdir()
    image = standin_image(tmp_path / "images")
    data = tmp_path / "data"
    data.mkdir()
    old_work = tmp_path / "old-sweep"
    rank_argv = ["apptainer", "exec", "--nv", "--cleanenv", "--env-file", "/o/a.env"]
    rank_argv += ["--bind", "/o:/o", "--bind", str(old_work), "--bind", f"{data}:{data}:ro"]
    rank_argv += ["--pwd", str(old_work), str(image), "/opt/conda/bin/python3"]
    record = read_json(cell / PROVENANCE_FILE)  # as if it ran so on SLURM
    record["reproducibility"]["image"] = {"sif_sha256": file_sha256(image)}
    record["run"]["image"] = {"path": str(image)}
    record["run"]["launcher"]["name"] = "mushin_slurm"
    record["run"]["container"] = {"rank_argv": rank_argv}
    write_json_atomic(cell / PROVENANCE_FILE, record)

    into = tmp_path / "again"
    capsys.readouterr()  # the original run's log
    assert main(["reproduce", str(cell), "--into", str(into), "--dry-run", "--json"]) == 0
    plan = _strict_json(capsys.readouterr().out)["plan"]
    assert plan["image"]["binds"] == [f"{data}:{data}:ro"]
    assert plan["image"]["python"] == "/opt/conda/bin/python3"
    command = shlex.split(plan["launcher"]["launcher_config"]["python"])
    assert command[-2:] == [str(image), "/opt/conda/bin/python3"]
    assert f"{data}:{data}:ro" in command and str(old_work) not in command
    assert main(["reproduce", str(cell), "--into", str(into), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"--bind {data}:{data}:ro, --image-python /opt/conda/bin/python3" in out

    data.rmdir()  # a bind whose source is gone: refused before anything is submitted
    assert main(["reproduce", str(cell), "--into", str(into)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--bind {data}:{data}:ro" in err and "does not exist" in err
    assert not into.exists()


def test_a_task_imported_from_the_current_directory_reaches_the_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m mushin_box reproduce`` run beside the task's module imports it from the
    current directory; the ranks run in their working directory, so it goes on their
    PYTHONPATH."""
    cell, module = _cell(tmp_path, monkeypatch)
    monkeypatch.setenv(VAR, "pw12")
    monkeypatch.chdir(Path(module.__file__).parent)
    capsys.readouterr()
    assert main(["reproduce", str(cell), "--into", str(tmp_path / "a"), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["launcher"]["pythonpath"] == str(Path(module.__file__).parent.resolve())
