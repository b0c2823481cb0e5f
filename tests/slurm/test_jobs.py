# SPDX-License-Identifier: MIT
"""One list of SLURM job states, read the same way by the launcher and the sweep."""

from __future__ import annotations

import pytest

from mushin_box._slurm.jobs import ENDED_STATES, LIVE_STATES, base_state, is_live

# JOB STATE CODES of squeue(1) (Slurm 22-24); every one must be classified
SQUEUE_STATES = (
    "BOOT_FAIL CANCELLED COMPLETED CONFIGURING COMPLETING DEADLINE FAILED NODE_FAIL "
    "OUT_OF_MEMORY PENDING PREEMPTED RUNNING RESV_DEL_HOLD REQUEUE_FED REQUEUE_HOLD "
    "REQUEUED RESIZING REVOKED SIGNALING SPECIAL_EXIT STAGE_OUT STOPPED SUSPENDED TIMEOUT"
).split()


def test_every_state_is_live_or_ended_never_both() -> None:
    assert not LIVE_STATES & ENDED_STATES
    assert set(SQUEUE_STATES) == LIVE_STATES | ENDED_STATES


@pytest.mark.parametrize(
    ("printed", "live"),
    [
        ("RUNNING", True),
        ("pending", True),
        ("REQUEUED", True),
        ("PREEMPTED", False),  # SLURM: terminated by preemption; a requeue shows REQUEUED
        ("CANCELLED by 1000", False),
        ("CANCELLED+", False),
        ("TIMEOUT", False),
        ("", False),
    ],
)
def test_is_live_reads_states_as_squeue_sacct_and_submitit_print_them(
    printed: str, live: bool
) -> None:
    assert is_live(printed) is live


def test_the_launcher_and_the_sweep_ask_the_same_question() -> None:
    import inspect

    from mushin_box._slurm import launcher
    from mushin_box._sweepdir import board, cancel, liveness, manifest

    # the launcher and the sweep's owner check call jobs.is_live; no one keeps a state list
    for module in (launcher, liveness):
        assert "is_live" in inspect.getsource(module)
    for module in (launcher, liveness, manifest, board, cancel):
        source = inspect.getsource(module)
        assert '"PENDING"' not in source and '"PREEMPTED"' not in source
    assert base_state("completed") == "COMPLETED"


@pytest.mark.slurm
def test_a_queued_array_s_tasks_are_pending_not_unknown(slurm_cluster: object) -> None:
    # squeue prints a pending array as one line (`21_[0-1%2]`) and sacct doesn't know its
    # tasks yet: `status`/`wait` must still see each task as queued, not as gone
    import subprocess

    from mushin_box._slurm.jobs import job_states

    job = subprocess.run(
        ["sbatch", "--parsable", "--hold", "--array=0-1%2", "--wrap", "true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.strip()
    try:
        assert job_states([f"{job}_0", f"{job}_1"]) == {
            f"{job}_0": "PENDING",
            f"{job}_1": "PENDING",
        }
    finally:
        subprocess.run(["scancel", job], timeout=30, check=False)


@pytest.mark.parametrize(
    "env",
    [
        {"SLURM_JOB_ID": "12"},
        {"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "2"},
        {"SLURM_JOB_ID": "10", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "0"},
    ],
)
def test_the_batch_scripts_job_id_is_the_one_python_names(env: dict[str, str]) -> None:
    # the requeue trap (bash) and the cells' owner records (Python) must name one job alike:
    # an array task's plain id would requeue or cancel the whole array
    import subprocess

    from mushin_box._slurm.jobs import JOB_ID_BASH, slurm_job_id

    out = subprocess.run(
        ["bash", "-c", f'{JOB_ID_BASH}; printf %s "$job"'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == slurm_job_id(env)
