# SPDX-License-Identifier: MIT
"""submitit's private names the kit relies on (``mushin_box._upstream.submitit``), one test
each. A failure names the submitit name whose behaviour changed: fix the seam, not its
callers."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import submitit

from mushin_box._upstream.submitit import SUBMIT_ARGS, sbatch_mem, sbatch_script, submit_command


def test_submitit_core_submit_is_what_submitit_appends_to_python_and_runs_the_job(
    tmp_path: Path,
) -> None:
    # a "python" that notes its arguments, then runs the real one with them
    seen = tmp_path / "argv.json"
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        f"{shlex.quote(sys.executable)} -c 'import json, sys; "
        f'json.dump(sys.argv[1:], open(sys.argv[1], "w"))\' {shlex.quote(str(seen))} "$@"\n'
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    folder = tmp_path / "jobs"
    executor = submitit.AutoExecutor(folder=folder, cluster="local", local_python=str(python))
    executor.update_parameters(timeout_min=2)
    job = executor.submit(sum, [40, 2])  # a function the job's interpreter can import
    assert job.result() == 42
    argv = json.loads(seen.read_text())[1:]
    assert argv == [*SUBMIT_ARGS, str(folder.resolve())]
    assert submit_command(str(python), folder.resolve()) == shlex.join([str(python), *argv])


def test_submitit_slurm_make_sbatch_string_writes_the_script_slurm_executor_submits() -> None:
    params = {
        "job_name": "demo",
        "nodes": 2,
        "ntasks_per_node": 4,
        "time": 30,
        "mem": "64GB",
        "setup": ["trap 'echo requeue' USR2"],
        "srun_args": ["--cpu-bind=none"],
        "additional_parameters": {"requeue": True, "signal": "B:USR2@120"},
    }
    script = sbatch_script("py -u -m x /f", "/runs/.submitit/%j", None, **params)
    lines = script.splitlines()
    for expected in (
        "#SBATCH --job-name=demo",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --time=30",
        "#SBATCH --mem=64GB",
        "#SBATCH --requeue",
        "#SBATCH --signal=B:USR2@120",
        "#SBATCH --output=/runs/.submitit/%j/%j_0_log.out",
    ):
        assert expected in lines, expected
    srun = next(line for line in lines if line.startswith("srun "))
    assert "--cpu-bind=none" in srun and srun.endswith("py -u -m x /f")
    assert lines.index("trap 'echo requeue' USR2") < lines.index(srun)  # setup runs first
    array = sbatch_script("c", "/runs/.submitit/%j", 3, **params).splitlines()
    assert "#SBATCH --array=0-2%3" in array


def test_submitit_slurm_convert_mem_writes_mem_gb_in_gb_and_a_fraction_in_mb() -> None:
    # what SlurmExecutor writes as --mem for the launcher's mem_gb
    assert [sbatch_mem(gb) for gb in (64, 0.5, 1.25)] == ["64GB", "512MB", "1280MB"]
