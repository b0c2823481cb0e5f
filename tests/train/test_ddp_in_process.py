# SPDX-License-Identifier: MIT
"""HydraDDP jobs one after another in one process (a sweep's in-process cells, a notebook):
each job starts clean. Real gloo on CPU; each sequence runs in a child process bounded by a
timeout, since the old failure of a stale process group is a hang in a collective."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, TESTS, read_rank_logs

from mushin_box._train.seeding import seed_records

pytestmark = pytest.mark.slow

# runs Workflow(fit_task) once per device count given, in this order, in one process
_SEQUENCE = """
import json, os, sys
import torch.distributed as dist
from ddp_helpers import fit_task, make_app_config
from mushin_box import Workflow
root, counts = sys.argv[1], [int(n) for n in sys.argv[2:]]
before = dict(os.environ)
out = []
for i, devices in enumerate(counts):
    ds = Workflow(fit_task, make_app_config(devices=devices, max_epochs=1)).run(
        working_dir=f"{root}/{i}", progress=False
    )
    out.append({"world_size": int(ds["world_size"])})
leaked = {k: os.environ.get(k) for k in set(os.environ) ^ set(before)}
print("RESULT " + json.dumps({"runs": out, "leaked": leaked, "group": dist.is_initialized()}))
"""


def _sequence(tmp_path: Path, *devices: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(REPO)])}
    cmd = [sys.executable, "-c", _SEQUENCE, str(tmp_path / "w"), *map(str, devices)]
    try:
        proc = subprocess.run(
            cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=90
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"jobs {devices} in one process hung:\n{(e.stderr or b'')[-3000:]!r}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT ") :])


def _job(root: Path) -> Path:
    (job,) = {p.parent for p in root.rglob(".hydra")}
    return job


def test_one_rank_then_two_ranks_both_ranks_train_and_are_seeded(
    tmp_path: Path, rank_log: Path
) -> None:
    got = _sequence(tmp_path, 1, 2)
    assert got["runs"] == [{"world_size": 1}, {"world_size": 2}]
    assert got["leaked"] == {} and got["group"] is False
    logs = read_rank_logs(rank_log)
    assert sorted(logs) == [0, 1], "rank 1 trained, in a process of its own"
    assert {r["world"] for recs in logs.values() for r in recs} == {"1", "2"}
    assert [r["seed"] for r in logs[1]] == ["1235"] and all(r["world"] == "2" for r in logs[1])
    job = _job(tmp_path / "w" / "1")
    assert {r: rec["seed"] for r, rec in seed_records(job).items()} == {0: 1234, 1: 1235}
    record = json.loads((job / "mushin_provenance.json").read_text())
    topology = record["run"]["topology"]
    g, k = topology["rank_columns"].index("global_rank"), topology["rank_columns"].index("seed")
    assert [(row[g], row[k]) for row in topology["ranks"]] == [(0, 1234), (1, 1235)], topology


def test_two_ranks_then_two_ranks_then_one_rank_do_not_hang(tmp_path: Path, rank_log: Path) -> None:
    got = _sequence(tmp_path, 2, 2, 1)
    assert got["runs"] == [{"world_size": 2}, {"world_size": 2}, {"world_size": 1}]
    assert got["leaked"] == {} and got["group"] is False
    logs = read_rank_logs(rank_log)
    assert [r["world"] for r in logs[1]] == ["2", "2"], "rank 1 trained in both 2-rank jobs"
