# SPDX-License-Identifier: MIT
"""The ``mushin_slurm``/``mushin_local`` Hydra launchers (mushin_box._slurm.launcher + plugin).

Unit tests: the config registration, validation, the generated sbatch script (quoting, the
host-side requeue trap, run by bash against stub ``srun``/``scontrol``). ``slurm`` tests: real
sweeps on the local cluster, including a job that is preempted and requeued by its batch script.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TESTS

from mushin_box import ResumeContext
from mushin_box._slurm.launcher import (
    LocalLauncherConf,
    SlurmLauncherConf,
    SubmititCellLauncher,
    render_sbatch,
)
from mushin_box._slurm.requeue import (
    requeue_setup_lines,
)

# -- tasks that run inside the jobs (imported by reference: this module's folder is on the jobs'
# PYTHONPATH) --


def ddp_task(lr: float, nodes: int, devices: int) -> dict[str, float]:
    """Fit TinyModule with HydraDDP on the ranks SLURM started (one per task)."""
    import pytorch_lightning as pl

    from mushin_box import HydraDDP, MetricsCallback
    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=devices,
        num_nodes=nodes,
        strategy=HydraDDP(),
        max_epochs=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[MetricsCallback()],
    )
    trainer.fit(TinyModule(lr=lr), datamodule=TinyDataModule())
    val_loss = float(trainer.callback_metrics["val_loss"])
    return {"world_size": float(trainer.world_size), "val_loss": val_loss}


def square_task(x: int) -> dict[str, float]:
    if x < 0:
        raise ValueError(f"negative x={x} (raised in the job)")
    return {"square": float(x * x), "pid": float(os.getpid())}


def preempted_once_task(x: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """First run: preempt this very job (USR2 to its batch shell, as SLURM's preemption
    would), then checkpoint when the host forwards USR1 and exit. Second run: return."""
    rank = os.environ["SLURM_PROCID"]
    marker = mushin_resume.dir / f"checkpoint.rank{rank}"
    if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":

        def checkpoint_and_exit(signum: int, frame: object) -> None:
            marker.write_text(signal.Signals(signum).name)
            os._exit(17)

        signal.signal(signal.SIGUSR1, checkpoint_and_exit)
        (mushin_resume.dir / f"ready.rank{rank}").touch()
        if rank == "0":  # once every rank can checkpoint
            deadline = time.monotonic() + 60
            while len(list(mushin_resume.dir.glob("ready.rank*"))) < int(
                os.environ["SLURM_NTASKS"]
            ):
                assert time.monotonic() < deadline, "the other ranks never started"
                time.sleep(0.1)
            job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
            subprocess.run(["scancel", "--batch", "--signal=USR2", job], check=True, timeout=15)
        time.sleep(60)
        raise RuntimeError("the host-side trap never sent SIGUSR1")
    ranks = sorted(p.read_text() for p in mushin_resume.dir.glob("checkpoint.rank*"))
    return {
        "x": float(x),
        "attempt": float(mushin_resume.attempt),
        "restarts": float(os.environ["SLURM_RESTART_COUNT"]),
        "checkpointed_ranks": float(ranks.count("SIGUSR1")),
    }


# -- configs and their registration --------------------------------------------------------------


def _fields(conf: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(conf):
        factory: Any = f.default_factory
        out[f.name] = factory() if f.default is dataclasses.MISSING else f.default
    return out


@pytest.mark.parametrize(
    ("ours", "stock"),
    [(SlurmLauncherConf, "SlurmQueueConf"), (LocalLauncherConf, "LocalQueueConf")],
)
def test_every_stock_field_with_its_default(ours: type, stock: str) -> None:
    from hydra_plugins.hydra_submitit_launcher import config

    theirs = _fields(getattr(config, stock))
    mine = _fields(ours)
    del theirs["_target_"], mine["_target_"]
    assert {k: mine[k] for k in theirs} == theirs


def _compose(*overrides: str) -> Any:
    from hydra import compose, initialize

    with initialize(version_base="1.3", config_path=None):
        return compose(overrides=list(overrides), return_hydra_config=True)


def test_mushin_slurm_composes_with_overrides() -> None:
    cfg = _compose(
        "hydra/launcher=mushin_slurm",
        "hydra.launcher.nodes=2",
        "hydra.launcher.tasks_per_node=4",
        "hydra.launcher.python='apptainer exec --nv img.sif python'",
        "hydra.launcher.srun_args=[--cpu-bind,none]",
        "hydra.launcher.requeue_on=[preemption,timeout]",
        "++hydra.launcher.additional_parameters={mail-type:END}",  # dicts need ++ (struct)
    )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("mushin_box_launcher.MushinSlurmLauncher")
    assert (launcher.nodes, launcher.tasks_per_node, launcher.max_requeues) == (2, 4, 3)
    assert launcher.python == "apptainer exec --nv img.sif python"
    settings = SubmititCellLauncher("slurm", {**launcher, "_target_": None}).settings
    assert settings["srun_args"] == ["--cpu-bind", "none"]
    assert settings["requeue_on"] == ["preemption", "timeout"]
    assert settings["additional_parameters"] == {"mail-type": "END"}


def test_mushin_local_composes() -> None:
    launcher = _compose(
        "hydra/launcher=mushin_local", "hydra.launcher.timeout_min=3"
    ).hydra.launcher
    assert launcher._target_.endswith("mushin_box_launcher.MushinLocalLauncher")
    assert launcher.timeout_min == 3 and "srun_args" not in launcher


@pytest.mark.parametrize(
    "override",
    [
        "hydra.launcher.not_a_field=1",
        "hydra.launcher.requeue_on=[sometimes]",
        "hydra.launcher.max_requeues=many",
        "hydra.launcher.srun_args=oops",
    ],
)
def test_unknown_fields_and_bad_values_are_rejected(override: str) -> None:
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        _compose("hydra/launcher=mushin_slurm", override)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"partition": "gpu\nrm -rf ~"}, "newlines"),
        ({"srun_args": ["ok", "bad\nline"]}, "newlines"),
        ({"additional_parameters": {"mail user": "x"}}, "not an sbatch option name"),
        ({"additional_parameters": {"signal": "USR1@60"}}, "signal_delay_s"),
        ({"max_num_timeout": 2}, "requeue_on=\\[timeout\\]"),
        ({"rank_signal": "USR2"}, "in-process requeue"),
        ({"rank_signal": "KILL"}, "signal name"),
        ({"python": "'unbalanced"}, "not a valid command line"),
        ({"max_requeues": -1}, "max_requeues"),
        ({"partiton": "gpu"}, "unknown mushin_slurm launcher field"),
        # the launcher reads SlurmSettings' checks, as flags, profiles and overrides do
        ({"array_parallelism": 0}, "array_parallelism must be a positive int"),
        ({"max_array_tasks": True}, "max_array_tasks must be a positive int"),
        ({"gres": "gpu:2"}, "requests GPUs a second time"),
    ],
)
def test_invalid_settings_fail_before_submitting(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SubmititCellLauncher("slurm", params)


class _FakeTask:
    def __init__(self, tmp_path: Path, ret: Any) -> None:
        self.paths = types.SimpleNamespace(result_pickle=tmp_path / "result.pkl")
        self.paths.result_pickle.touch()
        self._ret = ret

    def result(self) -> Any:
        return self._ret


class _FakeJob:
    """A done submitit job whose rank 0 returned ``ret`` and whose SLURM state is ``state``."""

    job_id, num_tasks = "7_0", 1

    def __init__(self, tmp_path: Path, ret: Any, state: str) -> None:
        self._task = _FakeTask(tmp_path, ret)
        self.watcher = types.SimpleNamespace(get_state=lambda job, mode: state)

    def done(self) -> bool:
        return True

    def task(self, index: int) -> _FakeTask:
        return self._task


@pytest.mark.parametrize(
    ("status", "state", "final"),
    [
        ("COMPLETED", "RUNNING", True),  # success is final at once
        ("FAILED", "PENDING", False),  # a failed run that SLURM requeued: wait for the next
        ("FAILED", "REQUEUED", False),
        ("FAILED", "COMPLETED", True),
        ("FAILED", "CANCELLED by 0", True),
    ],
)
def test_a_failure_is_final_only_once_slurm_says_the_job_ended(
    tmp_path: Path, status: str, state: str, final: bool
) -> None:
    from hydra.core.utils import JobReturn, JobStatus

    ret = JobReturn(overrides=["x=1"], status=JobStatus[status])
    outcome = SubmititCellLauncher("slurm", {})._outcome(_FakeJob(tmp_path, ret, state), ["x=1"])
    assert (outcome is ret) if final else (outcome is None)


def test_an_unpicklable_task_exception_comes_back_as_its_traceback() -> None:
    import threading as th

    from hydra.core.utils import JobReturn, JobStatus

    from mushin_box._slurm.launcher import _picklable

    class Odd(Exception):
        def __init__(self) -> None:
            super().__init__("odd")
            self.lock = th.Lock()

    ret = JobReturn(status=JobStatus.FAILED)
    ret.return_value = Odd()
    with pytest.raises(RuntimeError, match="Odd \\(not picklable\\)"):
        _ = _picklable(ret).return_value
    ok = JobReturn(status=JobStatus.FAILED)
    ok.return_value = ValueError("kept")
    with pytest.raises(ValueError, match="kept"):
        _ = _picklable(ok).return_value


# -- the sbatch script ---------------------------------------------------------------------------


def test_sbatch_script_has_python_srun_args_and_the_trap(tmp_path: Path) -> None:
    folder = tmp_path / "submitit" / "%j"
    params = {
        "name": "demo",
        "nodes": 2,
        "tasks_per_node": 4,
        "gpus_per_node": 4,
        "timeout_min": 30,
        "signal_delay_s": 60,
        "python": "apptainer exec --nv /img/x.sif python",
        "srun_args": ["--cpu-bind", "none"],
        "requeue_on": ["preemption", "timeout"],
        "max_requeues": 2,
        "setup": ["echo user-setup"],
    }
    text = render_sbatch(params, folder)
    lines = text.splitlines()
    for flag in (
        "--signal=B:USR2@60",
        "--requeue",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--gpus-per-node=4",
        "--time=30",
        "--job-name=demo",
    ):
        assert f"#SBATCH {flag}" in lines
    assert sum(line.startswith("#SBATCH --signal") for line in lines) == 1
    assert "trap __mushin_on_signal USR2" in lines and "srun() {" in lines
    assert "__mushin_requeue_on='preemption timeout' __mushin_max_requeues=2" in lines
    assert lines.index("srun() {") < lines.index("echo user-setup") < lines.index("# command")
    srun = lines[lines.index("export SUBMITIT_EXECUTOR=slurm") + 1]
    assert srun.startswith("srun --unbuffered --output ")
    assert srun.endswith(
        f"--cpu-bind none apptainer exec --nv /img/x.sif python -u -m submitit.core._submit "
        f"{shlex.quote(str(folder))}"
    )
    if shutil.which("srun"):  # the executor the launcher submits with writes the same text
        launcher = SubmititCellLauncher("slurm", {**params, "submitit_folder": str(folder)})
        executor = launcher.executor()
        assert executor._make_submission_file_text(executor._submitit_command_str, "x") == text


def test_no_requeue_policy_still_traps_but_adds_no_requeue_flag(tmp_path: Path) -> None:
    text = render_sbatch({"name": "x", "requeue_on": []}, tmp_path / "%j")
    assert "#SBATCH --requeue" not in text and "#SBATCH --signal=B:USR2@120" in text


NASTY = [
    'it\'s "quoted" $(touch PWNED) `touch PWNED` ; touch PWNED & | > PWNED',
    "$HOME ${PATH} \\ back\\slash \t tab * ? [a] ~ # hash !bang",
    "ünïcödé — ✓",
    "-leading-dash",
]


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(body)
    path.chmod(0o755)


def _stubs(tmp_path: Path, srun_body: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "srun", srun_body)
    scontrol = (  # the node list the batch script expands is no requeue: not logged
        '#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && exit 0\n'
        'echo "$@" >> "$STUB_DIR/scontrol.log"; touch "$STUB_DIR/scontrol.at"\n'
    )
    _stub(bin_dir, "scontrol", scontrol)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SUBMITIT_"))}
    return {
        **env,
        "PATH": f"{bin_dir}:{env['PATH']}",
        "STUB_DIR": str(tmp_path),
        "SLURM_JOB_ID": "4242",
    }


@pytest.mark.parametrize("nasty", NASTY)
def test_nasty_values_are_quoted(tmp_path: Path, nasty: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    folder = tmp_path / f"sub mit {nasty.replace('/', '_')}" / "%j"
    params = {
        "name": nasty,
        "partition": nasty,
        "comment": nasty,
        "account": nasty,
        "additional_parameters": {"mail_user": nasty},
        "srun_args": ["--comment", nasty, nasty],
        "python": f"{shlex.quote(sys.executable)} {shlex.quote(nasty)}",
    }
    text = render_sbatch(params, folder)
    script = tmp_path / "job.sh"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    flags = [line for line in text.splitlines() if line.startswith("#SBATCH ")]
    values = dict(line.removeprefix("#SBATCH --").split("=", 1) for line in flags if "=" in line)
    for key in ("job-name", "partition", "comment", "account", "mail-user"):
        assert shlex.split(values[key]) == [nasty], key
    # run the script: the stub srun records the argv the real one would get
    stub = f"#!{sys.executable}\nimport json, os, sys\n"
    stub += "json.dump(sys.argv[1:], open(os.environ['STUB_DIR'] + '/argv.json', 'w'))\n"
    env = _stubs(tmp_path, stub)
    run = subprocess.run(["bash", str(script)], env=env, cwd=work, capture_output=True, timeout=30)
    assert run.returncode == 0, run.stderr
    argv = json.loads((tmp_path / "argv.json").read_text())
    out, err = str(folder / "%j_%t_log.out"), str(folder / "%j_%t_log.err")
    assert argv == [
        "--unbuffered",
        "--output",
        out,
        "--error",
        err,
        "--comment",
        nasty,
        nasty,
        sys.executable,
        nasty,
        "-u",
        "-m",
        "submitit.core._submit",
        str(folder),
    ]
    assert not list(work.iterdir()) and not (tmp_path / "scontrol.log").exists()


# a stand-in for the ranks: reports that it started, turns SIGUSR1 into exit $STUB_USR1_RC
RANKS = """#!/bin/bash
trap 'echo "$$ USR1" >> "$STUB_DIR/ranks.log"; exit ${STUB_USR1_RC:-3}' USR1
touch "$STUB_DIR/started"
for ((i = 0; i < ${STUB_LOOPS:-300}; i++)); do sleep 0.1; done
touch "$STUB_DIR/ranks.done"
exit ${STUB_RC:-0}
"""


def _run_trap(
    tmp_path: Path,
    params: dict[str, Any],
    env: dict[str, str] | None = None,
    signal_after_start: bool = True,
) -> tuple[int, str, str, str]:
    """Run the generated script under bash with stubs; USR2 it once the 'ranks' run.
    Returns (exit code, scontrol calls, ranks' log, stderr)."""
    script = tmp_path / "job.sh"
    script.write_text(render_sbatch({"name": "t", **params}, tmp_path / "sub" / "%j"))
    full_env = {**_stubs(tmp_path, RANKS), **(env or {})}
    proc = subprocess.Popen(
        ["bash", str(script)], env=full_env, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        deadline = time.monotonic() + 15
        while signal_after_start and not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "stub srun never started"
            time.sleep(0.05)
        if signal_after_start:
            proc.send_signal(signal.SIGUSR2)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    read = lambda name: (tmp_path / name).read_text() if (tmp_path / name).exists() else ""  # noqa: E731
    return proc.returncode, read("scontrol.log"), read("ranks.log"), stderr


@pytest.mark.parametrize("setup", [None, ["set -euo pipefail"]], ids=["plain", "set-e"])
def test_trap_forwards_rank_signal_then_requeues_on_preemption(
    tmp_path: Path, setup: list[str] | None
) -> None:
    code, scontrol, ranks, stderr = _run_trap(tmp_path, {"setup": setup})
    assert scontrol == "requeue 4242\n", stderr
    assert ranks.endswith(" USR1\n") and "preemption" in stderr
    assert code == 3  # the ranks' status (SLURM ends a requeued job anyway)


def test_trap_requeues_an_array_task_by_its_array_id(tmp_path: Path) -> None:
    env = {"SLURM_ARRAY_JOB_ID": "4200", "SLURM_ARRAY_TASK_ID": "7"}
    _, scontrol, _, stderr = _run_trap(tmp_path, {}, env)
    assert scontrol == "requeue 4200_7\n", stderr


def test_trap_stops_after_max_requeues(tmp_path: Path) -> None:
    _, scontrol, ranks, stderr = _run_trap(
        tmp_path, {"max_requeues": 2}, {"SLURM_RESTART_COUNT": "2"}
    )
    assert scontrol == "" and "max_requeues=2 reached" in stderr and "USR1" in ranks


@pytest.mark.parametrize(("requeue_on", "requeued"), [(["preemption"], False), (["timeout"], True)])
def test_trap_tells_timeout_from_preemption(
    tmp_path: Path, requeue_on: list[str], requeued: bool
) -> None:
    # a 1-minute limit with the signal 12 s before it: any signal counts as the timeout
    params = {"timeout_min": 1, "signal_delay_s": 12, "requeue_on": requeue_on}
    _, scontrol, _, stderr = _run_trap(tmp_path, params)
    assert "timeout (job 4242" in stderr
    assert scontrol == ("requeue 4242\n" if requeued else ""), stderr


@pytest.mark.parametrize(
    ("elapsed_s", "reason", "requeued"),
    [(3360, "preemption", True), (3420, "timeout", False)],
    ids=["early-preemption", "late-timeout"],
)
def test_trap_classifies_by_elapsed_time_at_a_real_threshold(
    tmp_path: Path, elapsed_s: int, reason: str, requeued: bool
) -> None:
    """A 60-minute limit signalled 120 s before it: a signal after 3600 - 120 - 90 = 3390 s is
    the timeout, an earlier one a preemption. The batch shell's clock is preset (bash's
    ``SECONDS=N``: N plus the seconds since) 30 s either side of the threshold; only a
    preemption is in ``requeue_on``, so the two sides also act differently."""
    params = {
        "timeout_min": 60,
        "signal_delay_s": 120,
        "requeue_on": ["preemption"],
        "setup": [f"SECONDS={elapsed_s}"],
    }
    _, scontrol, ranks, stderr = _run_trap(tmp_path, params)
    assert f"s: {reason} (job 4242" in stderr, stderr
    assert "USR1" in ranks  # either way the ranks were told to checkpoint
    if requeued:
        assert scontrol == "requeue 4242\n", stderr
    else:
        assert scontrol == "" and "not requeueing: requeue_on has no timeout" in stderr, stderr


def test_trap_does_not_requeue_ranks_that_finished(tmp_path: Path) -> None:
    code, scontrol, ranks, stderr = _run_trap(tmp_path, {}, {"STUB_USR1_RC": "0"})
    assert scontrol == "" and "the ranks finished" in stderr and code == 0


def test_trap_waits_grace_for_ranks_that_ignore_the_signal(tmp_path: Path) -> None:
    params = {"rank_signal": None, "signal_delay_s": 12}  # grace: 12 - 10 = 2 s
    # the stub ranks ignore everything and run ~4.5 s: the requeue comes after the grace
    _, scontrol, ranks, stderr = _run_trap(tmp_path, params, {"STUB_LOOPS": "45"})
    assert scontrol == "requeue 4242\n" and ranks == "", stderr
    started = (tmp_path / "started").stat().st_mtime
    requeued = (tmp_path / "scontrol.at").stat().st_mtime
    assert 1.5 < requeued - started < (tmp_path / "ranks.done").stat().st_mtime - started


def test_trap_values_clamp_at_zero() -> None:
    """A signal delay under the margins: no grace wait and any signal counts as the timeout
    (never a negative number in the shell); no rank signal: an empty name, which the trap
    reads as "send none"."""
    lines = requeue_setup_lines(
        requeue_on=["timeout"], max_requeues=1, rank_signal=None, signal_delay_s=5, timeout_min=1
    )
    assert "__mushin_rank_signal='' __mushin_grace_s=0" in lines
    assert "__mushin_timeout_after_s=0" in lines


def test_trap_acts_once_when_signalled_twice(tmp_path: Path) -> None:
    """SLURM may signal again (preemption, then the time limit) while the trap waits for
    the ranks: the second signal must not classify and requeue a second time."""
    script = tmp_path / "job.sh"
    params = {"name": "t", "rank_signal": None, "signal_delay_s": 12}  # grace: 2 s
    script.write_text(render_sbatch(params, tmp_path / "sub" / "%j"))
    env = {**_stubs(tmp_path, RANKS), "STUB_LOOPS": "45"}  # ranks ignore signals, run ~4.5 s
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(["bash", str(script)], env=env, stderr=err, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "stub srun never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR2)
        while "SIGUSR2 after" not in log.read_text():  # the trap runs (2 s of grace wait)
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR2)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = log.read_text()
    assert stderr.count("SIGUSR2 after") == 1, stderr
    assert (tmp_path / "scontrol.log").read_text() == "requeue 4242\n", stderr


def test_without_signal_the_srun_status_is_the_script_status(tmp_path: Path) -> None:
    code, scontrol, ranks, _ = _run_trap(
        tmp_path, {}, {"STUB_LOOPS": "0", "STUB_RC": "7"}, signal_after_start=False
    )
    assert (code, scontrol, ranks) == (7, "", "")


# -- end to end ----------------------------------------------------------------------------------


def _slurm_config(cluster: Any, tmp_path: Path, name: str, nodes: int, gpus: int) -> dict[str, Any]:
    from mushin_box import submitit_slurm_config

    config = submitit_slurm_config(
        nodes=nodes, gpus_per_node=gpus, partition=cluster.partition, timeout_min=5
    )
    return {
        **config,
        "name": name,
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
        "poll_interval_s": 0.5,
        "max_wait_s": 150.0,
    }


def _cell_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/mushin_status.json"))


@pytest.mark.slurm
@pytest.mark.parametrize("nodes", [1, 2], ids=["1x2", "2x2"])
def test_ddp_sweep_on_slurm(slurm_cluster: Any, tmp_path: Path, nodes: int) -> None:
    from mushin_box import Workflow, load_experiment, multirun

    root = tmp_path / "sweep"
    ds = Workflow(ddp_task).run(
        working_dir=root,
        launcher="mushin_slurm",
        progress=False,
        launcher_config=_slurm_config(slurm_cluster, tmp_path, f"mushin-ddp-{nodes}", nodes, 2),
        lr=multirun([0.01, 0.1]),
        nodes=nodes,
        devices=2,
    )
    cells = _cell_dirs(root)
    assert len(cells) == 2
    for cell in cells:
        assert json.loads((cell / "mushin_status.json").read_text())["status"] == "completed"
        assert len(list(cell.rglob("fit_metrics.pt"))) == 1, cell
    assert ds["world_size"].values.tolist() == [2.0 * nodes] * 2
    assert ds["fit.val_loss"].dims == ("lr", "epoch") and bool(ds["fit.val_loss"].notnull().all())
    again = load_experiment(root)
    assert again["world_size"].values.tolist() == [2.0 * nodes] * 2
    sbatch = sorted((tmp_path / "submitit").glob("*/*_submission.sh")) or sorted(
        (tmp_path / "submitit").glob("*_submission.sh")
    )
    assert sbatch and "#SBATCH --signal=B:USR2@120" in sbatch[0].read_text()


@pytest.mark.slurm
def test_task_exception_comes_back_unchanged(slurm_cluster: Any, tmp_path: Path) -> None:
    from mushin_box import Workflow, multirun

    with pytest.raises(ValueError, match="negative x=-1 \\(raised in the job\\)"):
        Workflow(square_task).run(
            working_dir=tmp_path / "sweep",
            launcher="mushin_slurm",
            progress=False,
            launcher_config=_slurm_config(slurm_cluster, tmp_path, "mushin-fail", 1, 1),
            x=multirun([-1]),
        )


@pytest.fixture
def release_requeued(slurm_cluster: Any) -> Iterator[str]:
    """SLURM holds a requeued job ~2 minutes (BeginTime); start our jobs' next run sooner.

    Not at once: the node must first finish cleaning up the previous run of the same job id
    (started at once, the next run's batch step fails), hence the 3 s.
    """
    name = f"mushin-requeue-{os.getpid()}"
    stop = threading.Event()

    def release() -> None:
        held: dict[str, float] = {}
        while not stop.wait(0.5):
            out = subprocess.run(
                ["squeue", "-h", "-t", "PD", "-n", name, "-o", "%i %r"],
                capture_output=True,
                text=True,
                timeout=15,
            ).stdout
            for job, reason in (line.split(maxsplit=1) for line in out.splitlines()):
                if reason.strip() != "BeginTime":
                    continue
                since = held.setdefault(job, time.monotonic())
                if time.monotonic() - since >= 3:
                    subprocess.run(
                        ["scontrol", "update", f"JobId={job}", "StartTime=now"],
                        capture_output=True,
                        timeout=15,
                    )

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    yield name
    stop.set()
    thread.join(timeout=20)
    subprocess.run(["scancel", "-n", name], capture_output=True, timeout=15)


@pytest.mark.slurm
def test_preempted_job_is_requeued_by_its_batch_script(
    slurm_cluster: Any, tmp_path: Path, release_requeued: str
) -> None:
    from mushin_box import Workflow, multirun

    root = tmp_path / "sweep"
    config = _slurm_config(slurm_cluster, tmp_path, release_requeued, 1, 2)
    config.update(signal_delay_s=30, max_requeues=1)
    ds = Workflow(preempted_once_task).run(
        working_dir=root,
        launcher="mushin_slurm",
        launcher_config=config,
        progress=False,
        x=multirun([1, 2]),
    )
    assert ds["restarts"].values.tolist() == [1.0, 1.0]
    assert ds["attempt"].values.tolist() == [2.0, 2.0]  # the cell ran twice, same directory
    assert ds["checkpointed_ranks"].values.tolist() == [2.0, 2.0]  # both ranks got SIGUSR1
    logs = "".join(p.read_text() for p in (tmp_path / "submitit").rglob("*_0_log.err"))
    assert "mushin-box requeue: scontrol requeue" in logs


@pytest.mark.slow
def test_mushin_local_runs_cells_and_returns_task_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mushin_box import Workflow, multirun

    here = Path(__file__).resolve().parent  # the jobs unpickle square_task from this module
    path = [str(here), str(TESTS), str(REPO), os.environ.get("PYTHONPATH", "")]  # and conftest
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in path if p))

    config = {
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
        "timeout_min": 2,
        "poll_interval_s": 0.2,
        "max_wait_s": 90.0,
    }
    ds = Workflow(square_task).run(
        working_dir=tmp_path / "ok",
        launcher="mushin_local",
        launcher_config=config,
        progress=False,
        x=multirun([2, 3]),
    )
    assert ds["square"].values.tolist() == [4.0, 9.0]
    assert os.getpid() not in ds["pid"].values.tolist()  # ran in other processes
    with pytest.raises(ValueError, match="negative x=-2"):
        Workflow(square_task).run(
            working_dir=tmp_path / "bad",
            launcher="mushin_local",
            launcher_config=config,
            progress=False,
            x=multirun([-2]),
        )
