# SPDX-License-Identifier: MIT
"""Topology from the environment, the full two-part provenance record, and redaction."""

from __future__ import annotations

import doctest
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mushin_box import _hostlist, _provenance_diff, _provenance_full, _topology
from mushin_box._provenance import REDACTED, basic_provenance
from mushin_box._provenance_full import (
    SCHEMA,
    full_provenance,
    image_from_env,
    provenance_bytes,
    record_with_seeds,
    scrub,
    seeds_from_records,
    split_config,
    split_provenance,
    write_provenance,
)
from mushin_box._sidecars import canonical_dumps, read_json, write_json_atomic
from mushin_box._topology import (
    RankPlacement,
    Topology,
    parse_tasks_per_node,
    simulate_topology,
    simulated_slurm_env,
    topology_from_env,
)


def task(lr: float, seed: int = 0) -> dict[str, float]:
    return {"loss": lr}


FINGERPRINTS = {"config": "cfg-hash", "code": "code-hash"}


@pytest.mark.parametrize(
    "module", [_hostlist, _topology, _provenance_full, _provenance_diff], ids=lambda m: m.__name__
)
def test_docstring_examples_run(module: types.ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------- topology


def test_slurm_block_layout_with_uneven_tasks_and_job_info() -> None:
    env = {
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_NTASKS": "4",
        "SLURM_TASKS_PER_NODE": "3,1",
        "SLURM_JOB_NODELIST": "gpu[07-08]",
        "SLURMD_NODENAME": "gpu08",
        "SLURM_JOB_ID": "101",
        "SLURM_ARRAY_JOB_ID": "100",
        "SLURM_ARRAY_TASK_ID": "1",
        "SLURM_JOB_PARTITION": "a100",
        "SLURM_JOB_ACCOUNT": "proj",
        "SLURM_GPUS_ON_NODE": "4",
    }
    topo = topology_from_env(env, hostname="ignored")
    assert topo.launcher == "slurm" and topo.rank == 3 and topo.world_size == 4
    assert topo.nodes == ("gpu07", "gpu08") and topo.tasks_per_node == (3, 1)
    assert [r.hostname for r in topo.ranks] == ["gpu07"] * 3 + ["gpu08"]
    assert [(r.local_rank, r.node_rank) for r in topo.ranks] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    assert topo.gpus_per_node == 4
    assert topo.slurm is not None
    assert (topo.slurm.job_id, topo.slurm.array_job_id, topo.slurm.array_task_id) == (
        "101",
        "100",
        "1",
    )
    assert (topo.slurm.partition, topo.slurm.account) == ("a100", "proj")


def test_slurm_cyclic_layout() -> None:
    env = {"SLURM_PROCID": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NTASKS": "3",
           "SLURM_TASKS_PER_NODE": "2,1", "SLURM_DISTRIBUTION": "cyclic",
           "SLURM_JOB_NODELIST": "n[1-2]"}  # fmt: skip
    topo = topology_from_env(env)
    assert [(r.node_rank, r.local_rank) for r in topo.ranks] == [(0, 0), (1, 0), (0, 1)]


def test_slurm_own_entry_is_what_the_env_says() -> None:
    # an arbitrary distribution: the layout guess is wrong for this rank, the env wins
    env = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "1", "SLURM_NTASKS": "2",
           "SLURM_JOB_NODELIST": "n[1-2]", "SLURMD_NODENAME": "n2"}  # fmt: skip
    topo = topology_from_env(env)
    assert topo.ranks[0] == RankPlacement(0, 0, 1, "n2")


def test_slurm_without_node_list_knows_its_own_node() -> None:
    topo = topology_from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, hostname="box")
    assert topo.nodes == ("box",) and topo.world_size == 1


def test_torchrun_under_slurm_takes_node_names_from_slurm() -> None:
    env = {"RANK": "5", "LOCAL_RANK": "1", "GROUP_RANK": "1", "WORLD_SIZE": "8",
           "LOCAL_WORLD_SIZE": "4", "SLURM_PROCID": "1",
           "SLURM_JOB_NODELIST": "n[1-2]"}  # fmt: skip
    topo = topology_from_env(env, hostname="n2")
    assert topo.launcher == "torchrun" and topo.world_size == 8 and topo.nodes == ("n1", "n2")
    assert topo.ranks[5] == RankPlacement(5, 1, 1, "n2")
    assert topo.tasks_per_node == (4, 4)


def test_torchrun_alone_knows_only_its_own_node() -> None:
    env = {"RANK": "2", "LOCAL_RANK": "0", "GROUP_RANK": "1", "WORLD_SIZE": "4",
           "LOCAL_WORLD_SIZE": "2"}  # fmt: skip
    topo = topology_from_env(env, hostname="box")
    assert topo.nodes == (None, "box")
    assert [r.hostname for r in topo.ranks] == [None, None, "box", "box"]


def test_hydraddp_child_and_parent() -> None:
    child = topology_from_env(
        {"MUSHIN_GLOBAL_RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}, hostname="box"
    )
    assert (child.launcher, child.rank, child.world_size, child.nodes) == (
        "hydraddp",
        1,
        2,
        ("box",),
    )
    parent = topology_from_env({"LOCAL_RANK": "0", "WORLD_SIZE": "2"}, hostname="box")
    assert (parent.launcher, parent.rank, parent.world_size) == ("hydraddp", 0, 2)


def test_single_process_and_planned_hydraddp() -> None:
    single = topology_from_env({}, hostname="box")
    assert (single.launcher, single.world_size, single.nodes) == ("single", 1, ("box",))
    planned = topology_from_env({}, hostname="box", devices=4)
    assert (planned.launcher, planned.world_size) == ("hydraddp", 4)
    assert [r.local_rank for r in planned.ranks] == [0, 1, 2, 3]


def test_seeds_are_recorded_per_rank() -> None:
    topo = topology_from_env({}, hostname="box", devices=2, seeds={0: 10, 1: 11})
    assert [r.seed for r in topo.ranks] == [10, 11]
    data = topo.to_dict()
    assert data["rank_columns"] == ["global_rank", "local_rank", "node_rank", "hostname", "seed"]
    assert data["ranks"][1] == [1, 1, 0, "box", 11]
    assert topo.ranks[1].to_dict() == {
        "global_rank": 1, "local_rank": 1, "node_rank": 0, "hostname": "box", "seed": 11,
    }  # fmt: skip


@pytest.mark.parametrize(
    "env",
    [{"SLURM_PROCID": "x"}, {"RANK": "one"}, {"SLURM_PROCID": "0", "SLURM_JOB_NODELIST": "n[1-"}],
)
def test_bad_env_is_a_clear_value_error(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="SLURM_PROCID|RANK|SLURM_JOB_NODELIST"):
        topology_from_env(env)


def test_parse_tasks_per_node() -> None:
    assert parse_tasks_per_node("4(x2),1") == [4, 4, 1]
    with pytest.raises(ValueError, match="tasks per node"):
        parse_tasks_per_node("4(2)")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 8), st.data())
def test_simulated_env_gives_the_simulated_topology(nodes: int, gpus: int, data: Any) -> None:
    rank = data.draw(st.integers(0, nodes * gpus - 1))
    topo = topology_from_env(simulated_slurm_env(nodes, gpus, rank), hostname="elsewhere")
    assert topo == attrs.evolve(simulate_topology(nodes, gpus), rank=rank)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.booleans(), st.data())
def test_topology_dict_round_trip(nodes: int, gpus: int, seeded: bool, data: Any) -> None:
    rank = data.draw(st.integers(0, nodes * gpus - 1))
    topo = topology_from_env(simulated_slurm_env(nodes, gpus, rank),
                             seeds={0: 1} if seeded else None)  # fmt: skip
    back = Topology.from_dict(json.loads(json.dumps(topo.to_dict())))
    assert back == topo


def test_topology_is_a_frozen_hashable_value() -> None:
    topo = simulate_topology(2, 2, seed_base=0)
    assert hash(topo) == hash(simulate_topology(2, 2, seed_base=0))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        topo.world_size = 3  # type: ignore[misc]
    assert isinstance(topo, Topology) and topo.num_nodes == 2


# ---------------------------------------------------------------------------- split


def test_split_config_moves_trainer_shape_and_launcher() -> None:
    cfg = {
        "lr": 0.1,
        "model": {"nodes": 5},  # a model's own "nodes" is the experiment's
        "trainer": {"devices": 2, "num_nodes": 1, "max_epochs": 3},
        "fit": {"trainer": {"_target_": "lightning.Trainer", "devices": 8}},
        "other": {"_target_": "my.MyTrainer", "num_nodes": 2},
        "launcher": {"nodes": 2},
    }
    kept, moved = split_config(cfg)
    assert kept == {
        "lr": 0.1,
        "model": {"nodes": 5},
        "trainer": {"max_epochs": 3},
        "fit": {"trainer": {"_target_": "lightning.Trainer"}},
        "other": {"_target_": "my.MyTrainer"},
    }
    assert moved == {
        "trainer.devices": 2,
        "trainer.num_nodes": 1,
        "fit.trainer.devices": 8,
        "other.num_nodes": 2,
        "launcher": {"nodes": 2},
    }
    assert cfg["trainer"]["devices"] == 2  # input untouched


def test_split_provenance_normalizes_a_basic_record_and_is_idempotent() -> None:
    cfg = {"lr": 0.1, "seed": 3, "trainer": {"devices": 2}}
    basic = basic_provenance(task=task, config=cfg, fingerprints=FINGERPRINTS, seed_base=3)
    out = split_provenance(basic)
    assert out["schema"] == SCHEMA
    assert out["reproducibility"]["config"] == {"lr": 0.1, "trainer": {}}
    assert out["reproducibility"]["seed"]["base"] == 3
    assert out["run"]["config"] == {"trainer.devices": 2}
    assert out["run"]["fingerprints"] == {"config": "cfg-hash"}
    assert "seed_base" not in out["reproducibility"]
    assert split_provenance(out) == out


def _record(env: dict[str, str], *, devices: int, num_nodes: int, **kw: Any) -> dict[str, Any]:
    cfg = {
        "lr": 0.1,
        "seed": 3,
        "trainer": {"_target_": "pytorch_lightning.Trainer", "devices": devices,
                    "num_nodes": num_nodes, "max_epochs": 2},
    }  # fmt: skip
    fp = {**FINGERPRINTS, "config": f"whole-config-{devices}x{num_nodes}"}
    return full_provenance(task=task, config=cfg, fingerprints=fp, seed_base=3, environ=env, **kw)


def test_reproducibility_part_is_byte_identical_at_world_size_1_2_4() -> None:
    worlds = {
        "single": _record({}, devices=1, num_nodes=1),
        "hydraddp-2": _record({}, devices=2, num_nodes=1, seeds={0: 3, 1: 4}),
        "torchrun-2": _record({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"},
                              devices=2, num_nodes=1),
        "slurm-4": _record(simulated_slurm_env(2, 2, 0), devices=2, num_nodes=2,
                           launcher={"name": "mushin_slurm", "config": {"nodes": 2}}),
        "slurm-4-rank3": _record(simulated_slurm_env(2, 2, 3), devices=2, num_nodes=2),
    }  # fmt: skip
    blobs = {name: canonical_dumps(r["reproducibility"]) for name, r in worlds.items()}
    assert len(set(blobs.values())) == 1, blobs
    # ... while the run parts say how each one ran
    sizes = {name: r["run"]["topology"]["world_size"] for name, r in worlds.items()}
    assert sizes == {"single": 1, "hydraddp-2": 2, "torchrun-2": 2, "slurm-4": 4,
                     "slurm-4-rank3": 4}  # fmt: skip
    assert worlds["slurm-4"]["run"]["launcher"]["config"] == {"nodes": 2}
    assert worlds["slurm-4"]["run"]["config"]["trainer.num_nodes"] == 2
    assert [r[4] for r in worlds["hydraddp-2"]["run"]["topology"]["ranks"]] == [3, 4]


def test_full_record_contents() -> None:
    env = {**simulated_slurm_env(1, 2, 0), "PYTHONHASHSEED": "0", "NCCL_DEBUG": "WARN",
           "MUSHIN_SIF_SHA256": "ab" * 32, "APPTAINER_CONTAINER": "/img/t.sif",
           "HOME": "/root"}  # fmt: skip
    rec = _record(env, devices=2, num_nodes=1)
    repro, run = rec["reproducibility"], rec["run"]
    assert repro["image"] == {"sif_sha256": "ab" * 32}
    assert run["image"] == {"path": "/img/t.sif"}
    assert repro["env"] == {"PYTHONHASHSEED": "0"}
    assert run["env"]["NCCL_DEBUG"] == "WARN" and "HOME" not in run["env"]
    assert repro["seed"] == {"base": 3, "scheme": "base + global_rank"}
    assert "seed" not in repro["config"]  # not repeated: it is the seed base
    assert run["launcher"]["kind"] == "slurm" and run["launcher"]["tasks"] == 2
    assert run["topology"]["nodelist"] == "node0001"
    assert run["fingerprints"]["config"] == "whole-config-2x1"
    assert repro["config_sha256"] == hashlib.sha256(canonical_dumps(repro["config"])).hexdigest()


def test_image_from_env() -> None:
    assert image_from_env({"SINGULARITY_CONTAINER": "/x.sif"}) == {"path": "/x.sif"}
    assert image_from_env({}) is None


def test_record_with_seeds_fills_ranks_and_base(tmp_path: Path) -> None:
    rec = full_provenance(task=task, config={"lr": 1}, fingerprints={}, environ={}, seeds=None,
                          topology=simulate_topology(1, 2))  # fmt: skip
    assert rec["reproducibility"]["seed"]["base"] is None
    seeds = {0: {"base": 7, "rank": 0, "seed": 7}, 1: {"base": 7, "rank": 1, "seed": 8}}
    out = record_with_seeds(rec, seeds)
    assert out["reproducibility"]["seed"]["base"] == 7
    assert [r[4] for r in out["run"]["topology"]["ranks"]] == [7, 8]
    topo = Topology.from_dict(out["run"]["topology"])
    assert [r.seed for r in topo.ranks] == [7, 8]
    assert seeds_from_records(seeds) == {0: 7, 1: 8}
    write_provenance(tmp_path, out)
    assert read_json(tmp_path / "mushin_provenance.json") == out


def test_write_provenance_survives_an_unserializable_config(tmp_path: Path) -> None:
    rec = {"schema": 2, "reproducibility": {"config": {"x": object()}}, "run": {}}
    path = write_provenance(tmp_path, rec)
    assert "not JSON-serializable" in read_json(path)["reproducibility"]["config"]


_row_value = st.none() | st.integers(-(2**70), 2**70) | st.text() | st.booleans() | st.floats()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_row_value, min_size=5, max_size=5), max_size=8),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
)
def test_provenance_bytes_equals_canonical_dumps(rows: list[list[Any]], extra: Any) -> None:
    rec = {"run": {"topology": {"ranks": rows, **extra}, "x": extra}, "reproducibility": {}}
    try:
        expected = canonical_dumps(rec)
    except (TypeError, ValueError):
        with pytest.raises((TypeError, ValueError)):
            provenance_bytes(rec)
        return
    assert provenance_bytes(rec) == expected


def test_provenance_bytes_for_a_big_world() -> None:
    rec = {"run": {"topology": simulate_topology(64, 4, seed_base=3).to_dict()}}
    assert provenance_bytes(rec) == canonical_dumps(rec)
    rec["run"]["topology"]["ranks"][5][3] = "bad\udc80host"  # a lone surrogate
    assert provenance_bytes(rec) == canonical_dumps(rec)


# ---------------------------------------------------------------------------- secrets

PLANTED_ENV = "PLANTED-env-d41d8cd9"
PLANTED_CFG = "PLANTED-cfg-8f00b204"
PLANTED_URL = "PLANTED-url-e9800998"


def test_scrub_redacts_keys_and_url_credentials() -> None:
    value = {"password": "x", "db": [f"postgres://u:{PLANTED_URL}@h/db"], "n": None}
    out = scrub(value)
    assert out == {"password": REDACTED, "db": [f"postgres://{REDACTED}@h/db"], "n": None}


def test_planted_secrets_never_reach_any_file_or_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant secrets in the environment and the config; build, write and diff records (in
    process and through the CLI); no file written and no output contains them."""
    monkeypatch.setenv("MY_API_TOKEN", PLANTED_ENV)
    monkeypatch.setenv("NCCL_IB_PASSWORD", PLANTED_ENV)  # captured by default (NCCL_*)
    monkeypatch.setenv("MUSHIN_DB_URL", f"https://me:{PLANTED_URL}@db.example/x")
    cfg = {
        "lr": 0.1,
        "password": PLANTED_CFG,
        "db": {"apiKey": PLANTED_CFG, "url": f"https://me:{PLANTED_URL}@db/x"},
        "trainer": {"devices": 1, "launcher_token": PLANTED_CFG},
        "launcher": {"secret": PLANTED_CFG},
    }
    out = tmp_path / "out"
    for name, capture in (("default", None), ("everything", ("*",))):
        kw: dict[str, Any] = {} if capture is None else {"env_capture": capture}
        rec = full_provenance(task=task, config=cfg, fingerprints=FINGERPRINTS,
                              launcher={"name": "x", "config": {"password": PLANTED_CFG}},
                              **kw)  # fmt: skip
        write_provenance(out / name, rec)
        if capture is not None:
            assert rec["run"]["env"]["MY_API_TOKEN"] == REDACTED
    # a basic (schema 1) record as _cells writes it today; the diff normalizes it
    legacy = tmp_path / "legacy"
    write_json_atomic(
        legacy / "mushin_provenance.json",
        basic_provenance(task=task, config=cfg, fingerprints=FINGERPRINTS),
    )
    outputs: list[str] = []
    for a, b in ((out / "default", out / "everything"), (out / "default", legacy)):
        for extra in ([], ["--json"]):
            proc = subprocess.run(
                [sys.executable, "-m", "mushin_box", "diff", str(a), str(b), *extra],
                capture_output=True, text=True, timeout=120,
                env={**os.environ, "COLUMNS": "300"},
            )  # fmt: skip
            assert proc.returncode in (0, 1), proc.stderr
            outputs += [proc.stdout, proc.stderr]
    written = [p for p in out.rglob("*") if p.is_file()]
    assert len(written) == 2
    for planted in (PLANTED_ENV, PLANTED_CFG, PLANTED_URL):
        for path in written:
            assert planted not in path.read_text(encoding="utf-8"), path
        for text in outputs:
            assert planted not in text
    assert REDACTED in (out / "everything" / "mushin_provenance.json").read_text()


# ---------------------------------------------------------------------------- Workflow cells


def seeded_task(lr: float, seed: int = 0) -> dict[str, float]:
    from mushin_box import seed_everything_per_rank

    seed_everything_per_rank(seed)
    return {"loss": lr}


@pytest.mark.slow
def test_workflow_cells_carry_the_full_record(tmp_path: Path) -> None:
    """Once ``mushin_box/_cells.py`` writes the full record (see docs/provenance.md)."""
    from mushin_box import Workflow, multirun
    from mushin_box._provenance_diff import diff_provenance

    Workflow(seeded_task).run(
        working_dir=tmp_path / "a", progress=False, lr=0.1, seed=multirun([5])
    )
    record = read_json(tmp_path / "a" / "seed=5" / "mushin_provenance.json")
    if record.get("schema") == 1:
        pytest.skip("mushin_box/_cells.py still writes the basic (schema 1) record")
    assert record["schema"] == SCHEMA
    assert record["reproducibility"]["seed"]["base"] == 5
    topology = record["run"]["topology"]
    assert topology["launcher"] == "single" and topology["ranks"][0][4] == 5
    assert record["run"]["launcher"]["name"] == "basic"
    Workflow(seeded_task).run(
        working_dir=tmp_path / "b", progress=False, lr=0.1, seed=multirun([5])
    )
    same = diff_provenance(tmp_path / "a", tmp_path / "b")
    assert same.reproducible, same.breaks


# ---------------------------------------------------------------------------- real SLURM

_TASK_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from mushin_box._provenance_full import full_provenance
    from mushin_box._sidecars import canonical_dumps

    def task(lr, seed=0):
        return {"loss": lr}

    devices, num_nodes = int(sys.argv[1]), int(sys.argv[2])
    cfg = {"lr": 0.1, "seed": 3, "trainer": {"_target_": "pytorch_lightning.Trainer",
           "devices": devices, "num_nodes": num_nodes}}
    rec = full_provenance(task=task, config=cfg, fingerprints={"code": "c"}, seed_base=3)
    topo = rec["run"]["topology"]
    print(json.dumps({
        "repro": canonical_dumps(rec["reproducibility"]).decode(),
        "rank": topo["rank"], "world": topo["world_size"], "nodes": topo["nodes"],
        "own": dict(zip(topo["rank_columns"], topo["ranks"][topo["rank"]])),
        "env": {k: os.environ.get(k) for k in ("SLURMD_NODENAME", "SLURM_LOCALID",
                                               "SLURM_NODEID")},
    }))
    """
)


@pytest.mark.slurm
def test_real_slurm_worlds_1_2_4_share_the_reproducibility_bytes(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    script = tmp_path / "prov_task.py"
    script.write_text(_TASK_SCRIPT)
    blobs: set[str] = set()
    for nodes, per_node in ((1, 1), (1, 2), (2, 2)):
        proc = subprocess.run(
            ["srun", f"--nodes={nodes}", f"--ntasks-per-node={per_node}", "--time=2",
             sys.executable, str(script), str(per_node), str(nodes)],
            capture_output=True, text=True, timeout=180, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert sorted(x["rank"] for x in lines) == list(range(nodes * per_node))
        for x in lines:
            assert x["world"] == nodes * per_node and len(x["nodes"]) == nodes
            assert x["own"]["hostname"] == x["env"]["SLURMD_NODENAME"]
            assert str(x["own"]["local_rank"]) == x["env"]["SLURM_LOCALID"]
            assert str(x["own"]["node_rank"]) == x["env"]["SLURM_NODEID"]
            assert set(x["nodes"]) <= set(slurm_cluster.nodes)
            blobs.add(x["repro"])
    assert len(blobs) == 1
