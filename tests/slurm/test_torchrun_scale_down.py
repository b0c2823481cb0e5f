# SPDX-License-Identifier: MIT
"""An elastic scale-down on the local SLURM cluster: ``launch --torchrun --slurm --nodes 1:2
--gpus 2 --max-restarts 1``, and node 2 leaves when epoch 2 starts (its agent and workers
are killed, once). srun leaves node 1 running (``--kill-on-bad-exit=0``), its torchrun
restarts the group on the one node left, the restart continues from ``last.ckpt``, and the
cell completes at world size 2. The record names the change of world (epoch 2, 4 to 2) and
both attempts; with world-size-invariant batches the metrics equal an uninterrupted run's
within 1e-6."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from killing_exp import experiment
from test_torchrun_slurm import mushin

from mushin_box._core.sidecars import read_json

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# the example experiment, plus a callback by which node 2 leaves when epoch 2 starts (after
# epoch 1's last.ckpt): its first worker SIGKILLs its torchrun agent (the node's srun task,
# the workers' parent), then the node's workers (torchrun starts each in its own session),
# itself last. Once: a marker in the cell's directory.
EXP = """
import os
import signal
from pathlib import Path

import pytorch_lightning as pl
from hydra_zen import builds, make_config

from mushin_box import HydraDDP, MetricsCallback
from mushin_box.testing import TinyDataModule, TinyModule


def _children(pid):
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            parent = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
            if parent == str(pid):
                found.append(int(entry.name))
        except (OSError, IndexError):
            pass
    return found


def _holds_port(pid, port):
    # whether process pid has a socket listening on TCP port
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            words = row.split()
            if words[3] == "0A" and int(words[1].rsplit(":", 1)[1], 16) == port:
                listening.add(f"socket:[{words[9]}]")
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) in listening:
                return True
        except OSError:
            pass
    return False


class Node2LeavesAt2(pl.Callback):
    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch != 2 or os.environ.get("LOCAL_RANK") != "0":
            return
        # only a worker of a SLURM torchrun agent: the parent it kills must be that agent
        # (in the reference run the parent is the test's own process)
        if "TORCHELASTIC_RUN_ID" not in os.environ or "SLURM_JOB_ID" not in os.environ:
            return
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
        if b"mushin_box._slurm.torchrun\\x00agent" not in parent:  # torchrun runs in it
            return
        # node 2: the node whose agent does not hold the rendezvous store (the job's first
        # node on a real cluster; here the nodes share one host, and the agent that bound
        # the port first holds it). GROUP_RANK is the order the nodes joined in.
        endpoint = os.environ.get("MUSHIN_RDZV_ENDPOINT")
        if not endpoint or _holds_port(os.getppid(), int(endpoint.rsplit(":", 1)[1])):
            return
        try:  # once: the marker's creation is atomic
            os.close(os.open(Path(trainer.default_root_dir) / "node2_left", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        agent = os.getppid()
        workers = _children(agent)
        os.kill(agent, signal.SIGKILL)
        for pid in workers:
            if pid != os.getpid():
                os.kill(pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

"""
EXP += experiment("Node2LeavesAt2")


def test_node_2_leaving_at_epoch_2_the_cell_completes_on_node_1_with_the_same_metrics(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    exp = tmp_path / "exps" / "scale_exp.py"
    exp.parent.mkdir()
    exp.write_text(EXP)
    plain, elastic = tmp_path / "plain", tmp_path / "elastic"

    # the uninterrupted reference: 4 ranks here (node 2 leaves only under SLURM)
    ref = mushin("launch", str(exp), "--local", "--gpus", "4", "--working-dir", str(plain))
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-3000:]

    run = mushin(
        *("launch", str(exp), "--torchrun", "--slurm", "--nodes", "1:2", "--gpus", "2"),
        *("--max-restarts", "1", "--partition", slurm_cluster.partition, "--time", "5"),
        *("--working-dir", str(elastic), "--no-progress"),
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    cell = elastic / "cell"
    assert (cell / "node2_left").exists()  # node 2 did leave
    assert read_json(cell / "mushin_status.json")["status"] == "completed"

    record = read_json(cell / "mushin_provenance.json")["run"]
    assert record["topology"]["world_size"] == 2  # one node of two workers
    assert record["world_changes"] == [{"epoch": 2, "from": 4, "to": 2}]
    attempts = record["attempts"]
    print("attempts:", attempts)
    assert [a["world_size"] for a in attempts] == [4, 2]
    assert [(a["restart"], a["epoch"]) for a in attempts] == [(0, 0), (1, 2)]

    want = read_json(plain / "cell" / "mushin_metrics.json")
    got = read_json(cell / "mushin_metrics.json")
    print("uninterrupted:", want, "scaled down:", got)
    assert set(got) == set(want) and want
    for name, value in want.items():
        assert math.isclose(got[name], value, rel_tol=0, abs_tol=1e-6), (name, got, want)
