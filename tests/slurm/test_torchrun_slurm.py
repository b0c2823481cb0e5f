# SPDX-License-Identifier: MIT
"""``mushin-box launch EXP --torchrun --slurm --nodes 4 --gpus 4`` on the local SLURM cluster:
one torchrun agent per node (c10d rendezvous on the job's first node), real torchrun
workers on CPU with gloo. The record says torchrun, the rendezvous, and 16 ranks on the
job's 4 nodes; the run is the same experiment as a plain SLURM run of it (one task per
GPU), bit for bit, and as a 1-rank run within ``--atol 1e-6``, so ``diff`` exits 0; and
``status``, ``logs``, ``wait`` and ``cancel`` reach the cell through its job, as for any
SLURM cell; a preempted torchrun cell is requeued by the host-side trap and completes in
its next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from test_launcher import release_requeued  # noqa: F401  (a fixture, used by name)

from mushin_box import ResumeContext
from mushin_box._core.sidecars import read_json
from mushin_box._slurm.jobs import slurm_job_id

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

EXP = REPO / "examples" / "exp.py"


def mushin(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


def _sixteen_ranks(cluster: Any) -> None:
    """The 16-rank world needs 4 nodes of 4 GPUs (``scripts/local-slurm``'s default); a
    smaller cluster someone started by hand fails under ``MUSHIN_REQUIRE_SLURM=1`` (CI)."""
    if len(cluster.nodes) >= 4 and cluster.gpus_per_node >= 4:
        return
    why = f"16 ranks need 4 nodes x 4 GPUs; the running cluster has {len(cluster.nodes)} x "
    why += f"{cluster.gpus_per_node} (scripts/local-slurm stop, then start it again)"
    if os.environ.get("MUSHIN_REQUIRE_SLURM") == "1":
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def test_sixteen_ranks_as_torchrun_agents_and_as_slurm_tasks_match_one_rank(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    """The card's claim at the largest world CI runs: 4 nodes x 4 ranks, once as SLURM
    tasks and once as torchrun agents, are each the same experiment as 1 rank with the same
    results within ``--atol 1e-6`` (the gap grows with the world: docs/reproducibility.md)."""
    _sixteen_ranks(slurm_cluster)
    # a copy outside the repository: the records then hold no git state, which other work
    # in this checkout could change between the launches
    exp = tmp_path / "exp" / "exp.py"
    exp.parent.mkdir()
    exp.write_text(EXP.read_text())
    shape = ["--no-progress", "trainer.max_epochs=2", "datamodule.global_batch_size=64"]
    one = mushin("launch", str(exp), "--local", "--working-dir", str(tmp_path / "one"), *shape)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-4000:]
    common = ["--slurm", "--nodes", "4", "--gpus", "4", "--partition", slurm_cluster.partition]
    runs = {"torchrun": ["--torchrun", "--max-restarts", "1"], "tasks": []}
    for name, extra in runs.items():
        root = tmp_path / name
        proc = mushin("launch", str(exp), *common, "--time", "5", *shape, *extra,
                      "--working-dir", str(root))  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    # every rank but 0 returns its status alone: the job's pickles hold one config, not 16
    results = (tmp_path / "tasks" / ".submitit").rglob("*_result.pkl")
    sizes = {int(p.name.split("_")[1]): p.stat().st_size for p in results}
    assert sorted(sizes) == list(range(16))
    assert max(size for task, size in sizes.items() if task) < sizes[0] / 10, sizes
    root, cell = tmp_path / "torchrun", tmp_path / "torchrun" / "cell"
    assert read_json(cell / "mushin_status.json")["status"] == "completed"
    run = read_json(cell / "mushin_provenance.json")["run"]
    assert run["launcher"]["kind"] == "torchrun"
    assert (run["launcher"]["nodes"], run["launcher"]["tasks"]) == (4, 16)
    # the agents met on the job's first node, at the job's own port, under its id
    job = read_json(root / "mushin_jobs.json")["jobs"][0]["job_id"]
    topology = run["topology"]
    endpoint = run["rendezvous"]["endpoint"]
    assert run["rendezvous"]["backend"] == "c10d"
    # (the job's first node, whatever order the agents joined in)
    assert endpoint.startswith(f"{sorted(topology['nodes'])[0]}:")
    assert run["rendezvous"]["id"] == str(job)
    assert run["elastic"]["max_restarts"] == 1
    # 16 ranks on 4 of the cluster's nodes, 4 per node, each named as the node it ran on
    assert topology["world_size"] == 16 and len(topology["nodes"]) == 4
    assert set(topology["nodes"]) <= set(slurm_cluster.nodes)
    columns = topology["rank_columns"]
    ranks = [dict(zip(columns, row, strict=True)) for row in topology["ranks"]]
    assert [r["global_rank"] for r in ranks] == list(range(16))
    assert [r["local_rank"] for r in ranks] == [0, 1, 2, 3] * 4
    assert [r["node_rank"] for r in ranks] == [n for n in range(4) for _ in range(4)]
    assert [r["hostname"] for r in ranks] == [topology["nodes"][r["node_rank"]] for r in ranks]
    # logs: one file per node (its agent's task), under the node's first rank, each holding
    # the output of that node's workers
    logs = read_json(cell / "mushin_status.json")["logs"]
    assert sorted(logs) == sorted(f"rank{r}.{x}" for r in (0, 4, 8, 12) for x in ("err", "out"))
    assert len({logs[f"rank{r}.out"] for r in (0, 4, 8, 12)}) == 4
    for rank in ("0", "12"):
        shown = mushin("logs", str(root), "cell", "--rank", rank, timeout=120)
        assert shown.returncode == 0 and "Job completed successfully" in shown.stdout, shown
    # the same experiment as one SLURM task per GPU (bit for bit), and as one rank
    diff = mushin("diff", str(tmp_path / "tasks" / "cell"), str(cell), "--json", timeout=120)
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr
    assert json.loads(diff.stdout)["verdict"] == "same experiment, same results"
    for name in runs:
        diff = mushin("diff", str(tmp_path / "one"), str(tmp_path / name), "--atol", "1e-6")
        assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr
        assert diff.stdout.startswith("same experiment, same results"), diff.stdout[:500]
    # operate: status and wait follow the cell through its (finished) job
    status = mushin("status", str(root), "--json", timeout=120)
    assert status.returncode == 0, status.stderr
    assert [c["state"] for c in json.loads(status.stdout)["cells"]] == ["completed"]
    assert mushin("wait", str(root), "--timeout", "60", timeout=120).returncode == 0


def test_with_an_image_torchrun_runs_inside_it_with_the_ranks_env_file(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    """``--image``: each node's task is ``apptainer exec --nv --cleanenv --env-file ...
    IMAGE python -m mushin_box._slurm.torchrun agent ...`` (the Apptainer STAND-IN,
    tests/standins/apptainer-standin: argv and env file only, not Apptainer), so torchrun
    and its workers run with the env file, binds and NCCL settings of any rank."""
    from conftest import APPTAINER_STANDIN as STANDIN
    from conftest import standin_image

    image = standin_image(tmp_path)
    root = tmp_path / "sweep"
    env = {**os.environ, "PATH": f"{STANDIN}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", str(EXP), "--torchrun", "--slurm"]
        + ["--nodes", "2", "--gpus", "1", "--partition", slurm_cluster.partition, "--time", "5"]
        + ["--image", str(image), "--image-python", sys.executable, "--working-dir", str(root)]
        + ["--no-progress", "trainer.max_epochs=1"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run = read_json(root / "cell" / "mushin_provenance.json")["run"]
    assert run["launcher"]["kind"] == "torchrun" and run["topology"]["world_size"] == 2
    argv = run["container"]["rank_argv"]
    assert argv[:4] == ["apptainer", "exec", "--nv", "--cleanenv"] and str(image) in argv
    assert "--env-file" in argv and run["rendezvous"]["backend"] == "c10d"
    # the env file every rank reads, named in the job's command line, is the one the workers had
    script = next((root / ".submitit").rglob("*_submission.sh")).read_text()
    env_file = argv[argv.index("--env-file") + 1]
    assert f"--env-file {env_file}" in script
    assert "-m mushin_box._slurm.torchrun agent --nproc-per-node 1" in script
    assert run["container"]["env_file"] is not None  # the workers read it: it reached them


def test_cancel_stops_a_detached_torchrun_cell_through_its_job(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    root = tmp_path / "sweep"
    proc = mushin(
        *("launch", str(EXP), "--torchrun", "--slurm", "--nodes", "2", "--gpus", "1"),
        *("--partition", slurm_cluster.partition, "--time", "5", "--working-dir", str(root)),
        *("--detach", "trainer.max_epochs=50", "+module.epoch_sleep_s=2"),
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    job = str(read_json(root / "mushin_jobs.json")["jobs"][0]["job_id"])
    deadline = time.monotonic() + 240
    while json.loads(mushin("status", str(root), "--json").stdout)["cells"][0]["state"] != (
        "running"
    ):
        assert time.monotonic() < deadline, "the torchrun cell never started"
        time.sleep(1)
    stop = mushin("cancel", str(root), timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    # wait says how it ended (1: a cell was cancelled), and the job left the queue
    assert mushin("wait", str(root), "--timeout", "120", timeout=180).returncode == 1
    state = json.loads(mushin("status", str(root), "--json").stdout)["cells"][0]["state"]
    assert state == "cancelled"
    queue = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True)
    assert queue.stdout.strip() == ""


def preempted_once_under_torchrun(x: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """Every torchrun worker runs this cell. First run of the job: once every worker is up,
    rank 0 preempts the job (USR2 to its batch shell, as SLURM's preemption would) and the
    workers wait for the trap to stop them. Run after the requeue: return."""
    rank, world = os.environ["RANK"], int(os.environ["WORLD_SIZE"])
    if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
        (mushin_resume.dir / f"ready.rank{rank}").touch()
        if rank == "0":
            deadline = time.monotonic() + 60
            while len(list(mushin_resume.dir.glob("ready.rank*"))) < world:
                assert time.monotonic() < deadline, "the other workers never started"
                time.sleep(0.1)
            job = str(slurm_job_id())
            subprocess.run(["scancel", "--batch", "--signal=USR2", job], check=True, timeout=15)
        time.sleep(90)
        raise RuntimeError("the host-side trap never stopped the torchrun workers")
    return {
        "attempt": float(mushin_resume.attempt),
        "restarts": float(os.environ["SLURM_RESTART_COUNT"]),
        "world": float(world),
    }


def test_a_preempted_torchrun_cell_is_requeued_and_runs_again(
    tmp_path: Path,
    slurm_cluster: Any,
    release_requeued: str,  # noqa: F811 (the fixture)
) -> None:
    """The host-side requeue for a torchrun cell, from Python: submitit_slurm_config(...,
    torchrun=True) with Workflow.run. The trap signals the agents (TERM: torchrun stops its
    workers), requeues the job, and the next run of the cell completes in the same
    directory."""
    from mushin_box import Workflow, submitit_slurm_config

    config = submitit_slurm_config(
        nodes=2, gpus_per_node=1, partition=slurm_cluster.partition, timeout_min=5,
        torchrun=True, max_restarts=0,
    )  # fmt: skip
    assert config["rank_signal"] == "TERM"
    config.update(
        name=release_requeued,
        submitit_folder=str(tmp_path / "submitit" / "%j"),
        poll_interval_s=0.5,
        max_wait_s=240.0,
        signal_delay_s=30,
        max_requeues=1,
    )
    ds = Workflow(preempted_once_under_torchrun).run(
        working_dir=tmp_path / "sweep",
        launcher="mushin_slurm",
        launcher_config=config,
        progress=False,
        x=1,
    )
    assert float(ds["restarts"]) == 1.0  # SLURM ran the job a second time
    assert float(ds["attempt"]) == 2.0  # the same cell, its second attempt
    assert float(ds["world"]) == 2.0  # two nodes, one worker each
    logs = "".join(p.read_text() for p in (tmp_path / "submitit").rglob("*_0_log.err"))
    assert "mushin-box requeue: SIGTERM to the ranks" in logs
    assert "mushin-box requeue: scontrol requeue" in logs
