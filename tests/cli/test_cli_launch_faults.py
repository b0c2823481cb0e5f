# SPDX-License-Identifier: MIT
"""``launch`` faults that were tracebacks or unclear (issue 29, section 7): two launches
into one directory at the same moment, an experiment file that is a symlink loop or not a
``.py``, and ``--detach`` where no SLURM controller answers. Each is one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_cli_launch_refusals import assert_one_line_refusal

EXP = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def _run(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def test_two_launches_at_the_same_moment(tmp_path: Path) -> None:
    (tmp_path / "exp.py").write_text(EXP)
    argv = [sys.executable, "-m", "mushin_box", "launch", "exp.py", "--local", "--no-progress"]
    env = {**os.environ, "COLUMNS": "200"}
    for attempt in range(3):  # the race is won at random: a few tries, each bounded
        sweep = tmp_path / f"sweep{attempt}"
        procs = [
            subprocess.Popen(
                [*argv, "x=1,2", "--working-dir", str(sweep)],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        done = [(p, *p.communicate(timeout=300)) for p in procs]
        codes = sorted(p.returncode for p, _, _ in done)
        for p, _, err in done:
            assert "Traceback" not in err, err[-3000:]
            if p.returncode == 2:
                line = err.strip().splitlines()[-1]
                assert "already using the sweep directory" in line
        # one ran the sweep; the other was refused, or came after the first had finished
        assert codes in ([0, 2], [0, 0]), [err[-2000:] for _, _, err in done]


def test_an_experiment_file_that_is_a_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "loop.py").symlink_to("loop.py")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    for name in ("loop.py", "a.py"):
        assert_one_line_refusal(_run(tmp_path, name, "--local", "--dry-run"), "symlink loop", name)
    assert sorted(os.listdir(tmp_path)) == ["a.py", "b.py", "loop.py"]


def test_an_experiment_file_not_named_py_says_so(tmp_path: Path) -> None:
    (tmp_path / "exp.txt").write_text(EXP)
    for spec in ("exp.txt", "exp.txt:workflow", str(tmp_path / "exp.txt")):
        line = assert_one_line_refusal(
            _run(tmp_path, spec, "--local", "--dry-run"), "is not a .py file"
        )
        assert "rename it to exp.py" in line and "there is no module" not in line
    (tmp_path / "linked.py").symlink_to("exp.txt")
    assert_one_line_refusal(_run(tmp_path, "linked.py", "--local", "--dry-run"), "not a .py file")


def test_detach_where_no_controller_answers_says_so(tmp_path: Path) -> None:
    (tmp_path / "exp.py").write_text(EXP)
    proc = _run(tmp_path, "exp.py", "--detach", "--dry-run", SLURM_CONF=str(tmp_path / "none"))
    assert_one_line_refusal(proc, "no SLURM controller answered", "is not a file")
    assert sorted(os.listdir(tmp_path)) == ["exp.py"]
