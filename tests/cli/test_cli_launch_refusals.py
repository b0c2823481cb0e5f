# SPDX-License-Identifier: MIT
"""``mushin-box launch`` refuses what cannot work with one line naming the fix (exit 2, no
traceback) and leaves nothing behind: a broken experiment file, a working directory that
is busy, a file or holds ``${``, control characters in values bound for sbatch, and a job
that sbatch itself refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_cli_launch import EXP, launch

# what sbatch prints on stderr when it refuses a job for an unknown partition
SBATCH_REFUSAL = (
    "sbatch: error: invalid partition specified: nope\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified"
)

WORKFLOW_EXP = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def assert_one_line_refusal(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, and the last stderr line is the error holding every needle."""
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mushin-box launch: error: "), proc.stderr[-3000:]
    for needle in needles:
        assert needle in line, line
    return line


def fake_slurm(tmp_path: Path, sbatch_stderr: str = "") -> dict[str, str]:
    """An environment whose ``sbatch``/``srun`` are scripts: ``sbatch`` records that it was
    called in ``tmp_path/sbatch-called``, prints ``sbatch_stderr`` and fails, as the real
    one does when it refuses a job."""
    bin_dir = tmp_path / "fake-slurm-bin"
    bin_dir.mkdir()
    called = tmp_path / "sbatch-called"
    (bin_dir / "sbatch").write_text(
        f"#!/bin/sh\ntouch '{called}'\ncat >&2 <<'EOF'\n{sbatch_stderr}\nEOF\nexit 1\n"
    )
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}


def launch_env(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


# ------------------------------------------------------------------ item 10: broken files

BROKEN = {
    "syntax": ("Config = dict(\n    a=1,\n  b\n", ("SyntaxError", "syntax_exp.py:")),
    "raises": (
        "import os\nraise RuntimeError('no data under ' + os.sep + 'data')\n",
        ("RuntimeError: no data under /data", "raises_exp.py:2"),
    ),
    "missing_dependency": (
        "import os\nimport no_such_dependency_xyz\nConfig = 1\n",
        ("'no_such_dependency_xyz'", "missing_dependency_exp.py:2", "install"),
    ),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_experiment_file_is_one_line_exit_2(tmp_path: Path, kind: str) -> None:
    source, needles = BROKEN[kind]
    exp = tmp_path / f"{kind}_exp.py"
    exp.write_text(source)
    work = tmp_path / "sweep"
    proc = launch(str(exp), "--local", "--no-progress", "--working-dir", str(work))
    assert_one_line_refusal(proc, "could not load experiment", *needles)
    assert not work.exists()


def test_build_says_the_same_as_launch_about_a_broken_file(tmp_path: Path) -> None:
    # one loader message for both commands: the import line and the missing module
    spec = tmp_path / "needs_dep.py"
    spec.write_text("import no_such_dependency_xyz\nIMAGE = 1\n")
    build = subprocess.run(
        [sys.executable, "-m", "mushin_box", "build", str(spec), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert build.returncode == 2 and "Traceback" not in build.stderr, build.stderr
    line = build.stderr.strip().splitlines()[-1]
    assert "'no_such_dependency_xyz'" in line and "needs_dep.py:1" in line and "install" in line
    assert not list(tmp_path.glob("*.def"))  # nothing written


# ------------------------------------------------------------------ item 11: working dirs


@pytest.fixture
def workflow_exp(tmp_path: Path) -> Path:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    return exp


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_working_dir_that_is_a_file_is_refused(
    tmp_path: Path, workflow_exp: Path, dry_run: bool
) -> None:
    afile = tmp_path / "results"
    afile.write_text("keep me\n")
    for work in (afile, afile / "sweep"):
        args = ["--local", "--no-progress", "--working-dir", str(work)]
        proc = launch(str(workflow_exp), *args, *(["--dry-run"] if dry_run else []))
        assert_one_line_refusal(proc, str(afile), "not a directory", "--working-dir")
        assert afile.read_text() == "keep me\n"


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_working_dir_with_an_interpolation_is_refused(
    tmp_path: Path, workflow_exp: Path, dry_run: bool
) -> None:
    work = tmp_path / "out" / "${now:%H}"
    args = ["--local", "--no-progress", "--working-dir", str(work)]
    proc = launch(str(workflow_exp), *args, *(["--dry-run"] if dry_run else []))
    assert_one_line_refusal(proc, "'${'", "--working-dir")
    assert not (tmp_path / "out").exists()
    # the default sweep directory lies under the current one: the same rule
    odd = tmp_path / "a${b}"
    odd.mkdir()
    proc = launch(str(workflow_exp), "--local", "--no-progress", cwd=odd)
    assert_one_line_refusal(proc, "'${'")
    assert list(odd.iterdir()) == []


@pytest.fixture
def held_sweep_lock(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/busy``, its sweep lock held by another process (as a running launch holds
    it) for the duration of the test."""
    work = tmp_path / "busy"
    work.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from mushin_box._sweepdir.manifest import SweepLock\n"
            f"with SweepLock(Path({str(work)!r})):\n"
            "    print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield work
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_busy_working_dir_is_refused_and_left_as_it_was(
    held_sweep_lock: Path, workflow_exp: Path
) -> None:
    work = held_sweep_lock
    before = sorted(p.name for p in work.iterdir())
    for dry in ([], ["--dry-run"]):
        proc = launch(
            str(workflow_exp), "--local", "--no-progress", "--working-dir", str(work), *dry
        )
        assert_one_line_refusal(proc, "already using the sweep directory", str(work))
        assert sorted(p.name for p in work.iterdir()) == before


# ------------------------------------------------------------------ item 12: sbatch values


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--partition", "gpu\nrm -rf ~"),
        ("--account", "proj\rx"),
        ("--partition", "gpu\x0bx"),
        ("--account", "a\x1b[2Jb"),
    ],
)
def test_control_characters_bound_for_sbatch_are_refused_by_dry_run_and_run(
    tmp_path: Path, flag: str, value: str
) -> None:
    env = fake_slurm(tmp_path)
    work = tmp_path / "sweep"
    common = [str(EXP), flag, value, "--slurm", "--no-progress", "--working-dir", str(work)]
    for dry in (["--dry-run"], []):
        proc = launch_env(*common, *dry, env=env)
        line = assert_one_line_refusal(proc, flag.removeprefix("--"), "control character")
        assert value not in line  # shown escaped, so the refusal itself stays one line
    assert not work.exists() and not (tmp_path / "sbatch-called").exists()


# ------------------------------------------------------------------ item 13: sbatch refuses


def test_a_job_sbatch_refuses_is_one_line_with_sbatchs_message(tmp_path: Path) -> None:
    # a stand-in sbatch printing what the real one prints for an unknown partition (the
    # real cluster: test_sbatch_refusal_on_the_cluster_is_one_line_exit_2 below)
    env = fake_slurm(tmp_path, SBATCH_REFUSAL)
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    work = tmp_path / "sweep"
    args = [str(exp), "--partition", "nope", "--slurm", "--no-progress", "--working-dir", str(work)]
    proc = launch_env(*args, env=env)
    assert (tmp_path / "sbatch-called").exists()
    assert_one_line_refusal(
        proc,
        "sbatch refused the job: invalid partition specified: nope; Batch job submission "
        "failed: Invalid partition name specified",
        "--partition",
    )
    assert not work.exists()  # created by this launch for a job that never existed


def test_the_sbatch_message_is_taken_from_submitits_error() -> None:
    from submitit.core.utils import FailedJobError

    from mushin_box._launch.run import sbatch_refusal

    cause = subprocess.CalledProcessError(
        1, ["sbatch", "/w/.submitit/.submission_file_1.sh"], output="", stderr=SBATCH_REFUSAL
    )
    error = FailedJobError(SBATCH_REFUSAL)
    error.__cause__ = cause  # as submitit raises it: `raise FailedJobError(stderr) from cause`
    message = sbatch_refusal(error)
    assert message is not None and "\n" not in message
    assert message.startswith(
        "sbatch refused the job: invalid partition specified: nope; "
        "Batch job submission failed: Invalid partition name specified; "
    )
    assert "--partition" in message and "--account" in message  # the fix
    # a job that failed while running is not sbatch refusing it
    assert sbatch_refusal(FailedJobError("Job got killed for an unknown reason.")) is None
    other = FailedJobError("boom")
    other.__cause__ = subprocess.CalledProcessError(1, ["srun", "x"], stderr="srun: error")
    assert sbatch_refusal(other) is None


def test_no_cluster_is_said_with_sbatchs_fatal_line_and_the_fix() -> None:
    from submitit.core.utils import FailedJobError

    from mushin_box._launch.run import sbatch_refusal

    stderr = (
        "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n"
        "sbatch: error: fetch_config: DNS SRV lookup failed\n"
        "sbatch: fatal: Could not establish a configuration source\n"
    )
    error = FailedJobError(stderr)
    error.__cause__ = subprocess.CalledProcessError(1, ["sbatch", "x.sh"], stderr=stderr)
    message = sbatch_refusal(error)
    assert message is not None and message.startswith(
        "sbatch refused the job: Could not establish a configuration source; no SLURM cluster "
        "is reachable from here: set SLURM_CONF"
    )
    assert message.endswith("or run here with --local")


def test_what_sbatch_said_is_read_from_its_stderr_never_from_submitits_message() -> None:
    from submitit.core.utils import FailedJobError

    from mushin_box._launch.run import sbatch_refusal

    said = "sbatch: error: invalid partition specified: nope"
    error = FailedJobError(said)
    error.__cause__ = subprocess.CalledProcessError(1, ["sbatch", "x.sh"], stderr=said.encode())
    assert (sbatch_refusal(error) or "").startswith(
        "sbatch refused the job: invalid partition specified: nope; "
    )
    error.__cause__ = subprocess.CalledProcessError(1, ["sbatch", "x.sh"], stderr=None)
    assert (sbatch_refusal(error) or "").startswith("sbatch refused the job: exit status 1; ")


@pytest.mark.slurm
@pytest.mark.slow
def test_sbatch_refusal_on_the_cluster_is_one_line_exit_2(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    exp = tmp_path / "wf_exp.py"
    exp.write_text(WORKFLOW_EXP)
    work = tmp_path / "sweep"
    proc = launch(
        str(exp),
        "--partition",
        "no_such_partition_xyz",
        "--time",
        "5",
        "--no-progress",
        "--working-dir",
        str(work),
        cwd=tmp_path,
        timeout=300,
    )
    line = assert_one_line_refusal(proc, "sbatch refused the job: ", "--partition")
    assert "no_such_partition_xyz" in line or "nvalid partition" in line, line
    assert not work.exists()
