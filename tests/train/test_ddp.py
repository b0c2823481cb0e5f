# SPDX-License-Identifier: MIT
"""HydraDDP on CPU with gloo: 2 real processes per job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO, read_rank_logs
from ddp_helpers import fit_task, make_app_config
from hydra_zen import launch

from mushin_box import load_experiment, resumable
from mushin_box._train.seeding import seed_records

pytestmark = pytest.mark.slow


def _job_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob(".hydra"))


def _assert_clean_job_dir(job: Path) -> None:
    # exactly one metrics file, one Hydra output dir: the other rank left no Hydra output
    assert len(list(job.rglob("fit_metrics.pt"))) == 1
    hydra_dirs = [p for p in job.rglob("*") if p.is_dir() and "hydra" in p.name]
    assert hydra_dirs == [job / ".hydra"], hydra_dirs
    assert not list(job.glob("*.log")) or len(list(job.glob("*.log"))) == 1


@pytest.mark.floor
def test_hydra_zen_launch_two_ranks(cleandir: Path, rank_log: Path) -> None:
    job = launch(
        make_app_config(),
        resumable(fit_task),
        overrides=[f"hydra.run.dir={cleandir / 'run'}"],
        version_base="1.3",
    )
    assert job.return_value == {"seed": 1234, "world_size": 2, "attempt": 1}
    run = cleandir / "run"
    _assert_clean_job_dir(run)
    logs = read_rank_logs(rank_log)
    assert sorted(logs) == [0, 1], "both ranks trained"
    assert {r["seed"] for r in logs[0]} == {"1234"} and {r["seed"] for r in logs[1]} == {"1235"}
    assert all(r["world"] == "2" for recs in logs.values() for r in recs)
    assert {r: rec["seed"] for r, rec in seed_records(run).items()} == {0: 1234, 1: 1235}
    ds = load_experiment(run)
    assert ds["epoch"].values.tolist() == [0, 1]
    assert ds["fit.val_loss"].shape == (2,) and ds["fit.train_loss"].notnull().all()


def test_multirun_chdir_false_each_job_two_ranks(cleandir: Path, rank_log: Path) -> None:
    jobs = launch(
        make_app_config(max_epochs=1),
        resumable(fit_task),
        overrides=[f"hydra.sweep.dir={cleandir / 'multi'}", "hydra.job.chdir=False", "seed=10,20"],
        multirun=True,
        version_base="1.3",
    )
    assert [j.return_value["seed"] for j in jobs[0]] == [10, 20]
    dirs = _job_dirs(cleandir / "multi")
    assert len(dirs) == 2
    for d in dirs:
        _assert_clean_job_dir(d)
    # rank 1 of job 1 seeded 11, of job 2 seeded 21
    assert sorted({r["seed"] for r in read_rank_logs(rank_log)[1]}) == ["11", "21"]
    assert Path.cwd() == cleandir  # chdir=False: nothing moved the process


SCRIPT = textwrap.dedent(
    """
    import pytorch_lightning as pl
    from hydra_zen import builds, make_config, store
    from mushin_box import resumable
    from mushin_box.testing import TinyModule
    from ddp_helpers import fit_task, trainer_conf
    from mushin_box.testing import TinyDataModule

    class ScriptModule(TinyModule):  # lives in __main__: the other rank must import it too
        pass

    store(make_config(seed=7, stage="fit", trainer=trainer_conf(max_epochs=1),
                      module=builds(ScriptModule), datamodule=builds(TinyDataModule)),
          name="app")

    if __name__ == "__main__":
        store.add_to_hydra_store()
        resumable(fit_task).hydra_main(config_name="app", config_path=None, version_base="1.3")
    """
)


def test_hydra_main_script_multirun(tmp_path: Path, rank_log: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    proc = _run_bounded(
        [sys.executable, str(script), "-m", f"hydra.sweep.dir={tmp_path / 'm'}", "seed=7,8"],
        cwd=tmp_path,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    dirs = _job_dirs(tmp_path / "m")
    assert len(dirs) == 2
    for d in dirs:
        _assert_clean_job_dir(d)
    assert sorted({r["seed"] for r in read_rank_logs(rank_log)[1]}) == ["8", "9"]


@pytest.mark.parametrize("stage", ["validate", "test", "predict"])
def test_other_entry_points_run_same_method_on_every_rank(
    cleandir: Path, rank_log: Path, stage: str
) -> None:
    job = launch(
        make_app_config(),
        resumable(fit_task),
        overrides=[f"hydra.run.dir={cleandir / 'run'}", f"stage={stage}"],
        version_base="1.3",
    )
    assert job.return_value["world_size"] == 2
    if stage != "predict":
        assert len(list((cleandir / "run").rglob(f"{stage}_metrics.pt"))) == 1
    assert not read_rank_logs(rank_log), "no rank trained"


def test_resume_from_last_ckpt_continues_on_both_ranks(cleandir: Path, rank_log: Path) -> None:
    run = cleandir / "run"
    first = launch(
        make_app_config(max_epochs=2),
        resumable(fit_task),
        overrides=[f"hydra.run.dir={run}"],
        version_base="1.3",
    )
    assert first.return_value["attempt"] == 1
    assert (run / "checkpoints" / "last.ckpt").is_file()
    for f in rank_log.iterdir():
        f.unlink()
    second = launch(
        make_app_config(max_epochs=4),
        resumable(fit_task),
        overrides=[f"hydra.run.dir={run}"],
        version_base="1.3",
    )
    assert second.return_value["attempt"] == 2
    logs = read_rank_logs(rank_log)
    assert sorted(logs) == [0, 1]
    for rank in (0, 1):
        assert [r["epoch"] for r in logs[rank]] == ["2", "3"], f"rank {rank} restarted at epoch 0"
    assert load_experiment(run)["epoch"].values.tolist() == [0, 1, 2, 3]


TORCHRUN_APP = textwrap.dedent(
    """
    import sys
    from hydra_zen import launch
    from mushin_box import resumable
    from ddp_helpers import fit_task, make_app_config
    devices, out = int(sys.argv[1]), sys.argv[2]
    launch(make_app_config(devices=devices, max_epochs=1), resumable(fit_task),
           overrides=[f"hydra.run.dir={out}"], version_base="1.3")
    """
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(tmp_path: Path, devices: int, timeout: float) -> subprocess.CompletedProcess[str]:
    app = tmp_path / "elastic_app.py"
    app.write_text(TORCHRUN_APP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)])}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(_free_port()),
        str(app),
        str(devices),
        str(tmp_path / "out"),
    ]
    return _run_bounded(cmd, cwd=tmp_path, env=env, timeout=timeout)


def _run_bounded(
    cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """subprocess.run, but a timeout kills the whole process group (torchrun's workers too)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"timed out after {timeout}s:\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def test_torchrun_matching_world_steps_aside(tmp_path: Path, rank_log: Path) -> None:
    proc = _torchrun(tmp_path, devices=2, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = read_rank_logs(rank_log)
    assert sorted(logs) == [0, 1] and all(r["world"] == "2" for r in logs[1])
    # torchrun started both ranks: HydraDDP started none of its own
    assert "mushin_box._train.ddp_child" not in proc.stdout + proc.stderr


def test_torchrun_too_many_ranks_fails_fast(tmp_path: Path) -> None:
    """Two torchrun ranks for a 1-device Trainer: each rank refuses before rendezvous, and the
    run ends within the bound (every other shape: ``test_world_size.py``, in-process)."""
    proc = _torchrun(tmp_path, devices=1, timeout=120)  # the bound fails the test if it hangs
    assert proc.returncode != 0
    assert "DDP world size mismatch" in proc.stderr
    assert "started 2 ranks (WORLD_SIZE=2)" in proc.stderr and "= 1 x 1 = 1" in proc.stderr
    assert "2 tasks per node were launched but the Trainer has devices=1" in proc.stderr
    assert "tasks_per_node == gpus_per_node == Trainer devices" in proc.stderr
    assert not (tmp_path / "out" / "fit_metrics.pt").exists()  # nothing trained


KILL_APP = textwrap.dedent(
    """
    import sys
    from hydra_zen import launch
    from mushin_box import resumable
    from ddp_helpers import fit_task, make_app_config
    launch(make_app_config(max_epochs=100000), resumable(fit_task),
           overrides=[f"hydra.run.dir={sys.argv[1]}"], version_base="1.3")
    """
)


def _children_of_marker(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if b"mushin_box._train.ddp_child" in cmd and marker.encode() in env:
            pids.append(int(d.name))
    return pids


def test_rank0_sigkill_leaves_no_child(tmp_path: Path, rank_log: Path) -> None:
    app = tmp_path / "kill_app.py"
    app.write_text(KILL_APP)
    marker = f"MUSHIN_TEST_MARKER={tmp_path}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]),
        "MUSHIN_TEST_MARKER": str(tmp_path),
    }
    rank0 = subprocess.Popen(
        [sys.executable, str(app), str(tmp_path / "out")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not (rank_log / "rank1.log").exists():  # rank 1 is training
            assert time.monotonic() < deadline, "rank 1 never started"
            assert rank0.poll() is None, "rank 0 exited early"
            time.sleep(0.5)
        assert _children_of_marker(marker)
        rank0.send_signal(signal.SIGKILL)
        rank0.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _children_of_marker(marker):
            assert time.monotonic() < deadline, "rank 1 outlived rank 0"
            time.sleep(0.2)
    finally:
        if rank0.poll() is None:
            rank0.kill()
        for pid in _children_of_marker(marker):
            os.kill(pid, signal.SIGKILL)


def test_rank0_exception_ends_its_ranks_and_spares_the_driver(
    cleandir: Path, rank_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = str(cleandir)
    monkeypatch.setenv("MUSHIN_TEST_MARKER", marker)
    monkeypatch.setenv("MUSHIN_TEST_FAIL_RANK", "0")
    with pytest.raises(RuntimeError, match="planned failure of rank 0"):
        launch(
            make_app_config(max_epochs=50),
            resumable(fit_task),
            overrides=[f"hydra.run.dir={cleandir / 'run'}"],
            version_base="1.3",
        )
    deadline = time.monotonic() + 30
    while _children_of_marker(f"MUSHIN_TEST_MARKER={marker}"):
        assert time.monotonic() < deadline, "rank 1 outlived rank 0's failure"
        time.sleep(0.2)
    # this process (the "sweep driver") is alive and its environment is restored
    assert "LOCAL_RANK" not in os.environ and "WORLD_SIZE" not in os.environ


RENDEZVOUS_APP = textwrap.dedent(
    """
    import pytorch_lightning as pl
    from mushin_box import HydraDDP
    from mushin_box.testing import TinyDataModule, TinyModule
    trainer = pl.Trainer(accelerator="cpu", devices=1, num_nodes=2, max_epochs=1,
                         strategy=HydraDDP(rendezvous_timeout_s=3), logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(TinyModule(), datamodule=TinyDataModule())
    """
)


def test_unreachable_master_ends_the_rank_instead_of_waiting_30_minutes(tmp_path: Path) -> None:
    """Rank 1 of a torchrun-style world whose MASTER_ADDR does not resolve: torch would
    retry for its 30-minute timeout; HydraDDP's rendezvous_timeout_s ends it, saying why."""
    app = tmp_path / "rendezvous_app.py"
    app.write_text(RENDEZVOUS_APP)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        RANK="1",
        LOCAL_RANK="0",
        GROUP_RANK="1",
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="1",
        TORCHELASTIC_RUN_ID="mushin-test",
        MASTER_ADDR="no-such-host.invalid",
        MASTER_PORT=str(_free_port()),
        PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]),
    )
    proc = _run_bounded([sys.executable, str(app)], cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "rank 1 of 2 could not join the process group" in proc.stderr
    assert "no-such-host.invalid" in proc.stderr and "rendezvous_timeout_s" in proc.stderr


def test_rendezvous_bound_never_ends_rank_0_in_the_sweeps_own_process(tmp_path: Path) -> None:
    """Rank 0 of a local HydraDDP job runs in the process that called Workflow.run: its
    ranks taking longer than rendezvous_timeout_s to start must not kill that process."""
    import pytorch_lightning as pl
    from ddp_helpers import SlowChildDataModule, fit_task
    from hydra_zen import builds, make_config

    from mushin_box import HydraDDP, Workflow
    from mushin_box.testing import TinyModule

    config = make_config(
        seed=1,
        stage="fit",
        trainer=builds(
            pl.Trainer,
            accelerator="cpu",
            devices=2,
            max_epochs=1,
            logger=False,
            strategy=builds(HydraDDP, rendezvous_timeout_s=2.0),
            enable_checkpointing=False,
            enable_progress_bar=False,
        ),
        module=builds(TinyModule),
        datamodule=builds(SlowChildDataModule, child_sleep_s=6.0),
    )
    ds = Workflow(fit_task, config).run(working_dir=tmp_path / "w", progress=False)
    assert int(ds["world_size"]) == 2  # we are still here, and both ranks trained
