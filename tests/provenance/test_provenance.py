# SPDX-License-Identifier: MIT
"""Topology from the environment, the full two-part provenance record, and redaction."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import attrs
import pytest
from conftest import run_doctests
from hypothesis import given, settings
from hypothesis import strategies as st

from mushin_box._core.layout import PACKAGES_FILE
from mushin_box._core.redact import REDACTED, redact, redact_text
from mushin_box._core.sidecars import canonical_dumps, read_json, write_json_atomic
from mushin_box._provenance import env as _provenance_env
from mushin_box._provenance import files as _provenance_files
from mushin_box._provenance import full as _provenance_full
from mushin_box._provenance import record as _provenance
from mushin_box._provenance import topology as _topology
from mushin_box._provenance.env import device_facts, image_from_env
from mushin_box._provenance.files import packages_beside, write_provenance
from mushin_box._provenance.full import (
    SCHEMA,
    finish_record,
    full_provenance,
    record_with_seeds,
    seeds_from_records,
    split_config,
    split_provenance,
)
from mushin_box._provenance.record import (
    basic_provenance,
    canonical_package_name,
    installed_packages,
    package_set,
)
from mushin_box._provenance.topology import (
    RankPlacement,
    Topology,
    topology_from_env,
)
from mushin_box._results import diff as _provenance_diff
from mushin_box.testing import simulate_topology, simulated_slurm_env


def task(lr: float, seed: int = 0) -> dict[str, float]:
    return {"loss": lr}


FINGERPRINTS = {"config": "cfg-hash", "code": "code-hash"}


@pytest.mark.parametrize(
    "module",
    [
        _topology,
        _provenance,
        _provenance_env,
        _provenance_files,
        _provenance_full,
        _provenance_diff,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples_run(module: types.ModuleType) -> None:
    result = run_doctests(module)
    assert result.failed == 0 and result.attempted > 0


# ---------------------------------------------------------------------------- topology


def test_slurm_records_its_own_placement_and_the_job() -> None:
    env = {
        "SLURM_PROCID": "3",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_NTASKS": "4",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_TASKS_PER_NODE": "3,1",
        "SLURM_DISTRIBUTION": "cyclic",
        "MUSHIN_JOB_NODES": "gpu07,gpu08",
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
    assert topo.nodes == ("gpu07", "gpu08") and topo.tasks_per_node == (2, 2)
    # no guess at where the other ranks ran: they record themselves (ranks.py)
    assert topo.ranks == (RankPlacement(3, 0, 1, "gpu08"),) and topo.own == topo.ranks[0]
    assert topo.gpus_per_node == 4
    assert topo.slurm is not None
    assert (topo.slurm.job_id, topo.slurm.array_job_id, topo.slurm.array_task_id) == (
        "101",
        "100",
        "1",
    )
    assert (topo.slurm.partition, topo.slurm.account) == ("a100", "proj")


def test_slurm_without_tasks_per_node_records_none() -> None:
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "3", "MUSHIN_JOB_NODES": "n1,n2"}
    topo = topology_from_env(env)
    assert topo.tasks_per_node == () and topo.to_dict()["tasks_per_node"] == []


def test_slurm_without_node_list_knows_its_own_node() -> None:
    topo = topology_from_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, hostname="box")
    assert topo.nodes == ("box",) and topo.world_size == 1


def test_torchrun_under_slurm_takes_node_names_from_slurm() -> None:
    env = {
        "RANK": "5",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
        "WORLD_SIZE": "8",
        "LOCAL_WORLD_SIZE": "4",
        "SLURM_PROCID": "1",
        "MUSHIN_JOB_NODES": "n1,n2",
    }
    topo = topology_from_env(env, hostname="n2")
    assert topo.launcher == "torchrun" and topo.world_size == 8 and topo.nodes == ("n1", "n2")
    assert topo.ranks == (RankPlacement(5, 1, 1, "n2"),)
    assert topo.tasks_per_node == (4, 4)


def test_torchrun_alone_knows_only_its_own_node() -> None:
    env = {
        "RANK": "2",
        "LOCAL_RANK": "0",
        "GROUP_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
    }
    topo = topology_from_env(env, hostname="box")
    assert topo.nodes == (None, "box")
    assert topo.ranks == (RankPlacement(2, 0, 1, "box"),)


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
    topo = topology_from_env({}, hostname="box", devices=2).with_seeds({0: 10, 1: 11})
    assert [r.seed for r in topo.ranks] == [10, 11]
    data = topo.to_dict()
    assert data["rank_columns"] == ["global_rank", "local_rank", "node_rank", "hostname", "seed"]
    assert data["ranks"][1] == [1, 1, 0, "box", 11]


@pytest.mark.parametrize(
    "env",
    [{"SLURM_PROCID": "x"}, {"RANK": "one"}],
)
def test_bad_env_is_a_clear_value_error(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="SLURM_PROCID|RANK"):
        topology_from_env(env)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 8), st.data())
def test_simulated_env_gives_the_simulated_topology(nodes: int, gpus: int, data: Any) -> None:
    rank = data.draw(st.integers(0, nodes * gpus - 1))
    topo = topology_from_env(simulated_slurm_env(nodes, gpus, rank), hostname="elsewhere")
    world = simulate_topology(nodes, gpus)
    assert topo == attrs.evolve(world, rank=rank, ranks=[world.ranks[rank]])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.booleans(), st.data())
def test_topology_dict_holds_every_rank(nodes: int, gpus: int, seeded: bool, data: Any) -> None:
    rank = data.draw(st.integers(0, nodes * gpus - 1))
    topo = topology_from_env(simulated_slurm_env(nodes, gpus, rank))
    topo = topo.with_seeds({0: 1} if seeded else None)
    back = json.loads(json.dumps(topo.to_dict()))
    assert [RankPlacement(*row) for row in back["ranks"]] == list(topo.ranks)
    assert back["rank_columns"] == list(RankPlacement._fields)
    assert back["nodes"] == list(topo.nodes) and back["rank"] == rank
    assert back["slurm"] == attrs.asdict(topo.slurm)


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


def _record(
    env: dict[str, str],
    *,
    devices: int,
    num_nodes: int,
    devices_facts: dict[str, Any] | None = None,
    **kw: Any,
) -> dict[str, Any]:
    if devices_facts is not None:
        kw["devices"] = devices_facts
    cfg = {
        "lr": 0.1,
        "seed": 3,
        "trainer": {
            "_target_": "pytorch_lightning.Trainer",
            "devices": devices,
            "num_nodes": num_nodes,
            "max_epochs": 2,
        },
    }
    fp = {**FINGERPRINTS, "config": f"whole-config-{devices}x{num_nodes}"}
    return full_provenance(task=task, config=cfg, fingerprints=fp, seed_base=3, environ=env, **kw)


IMAGE_ENV = {
    "MUSHIN_SIF_SHA256": "ab" * 32,
    "MUSHIN_SIF_UUID": "5b2b8c4e-0000-4000-8000-000000000001",
    "MUSHIN_IMAGE_DEFINITION_SHA256": "cd" * 32,
    "MUSHIN_IMAGE_BASE_DIGEST": "sha256:" + "ef" * 32,
    "APPTAINER_CONTAINER": "/img/t.sif",
}


def _launch_env(tmp_path: Path, ranks: int, text: str = "MASTER_PORT=1\n") -> dict[str, str]:
    """The variables the rank wrapper's env file gives a rank (one env file per world)."""
    env_file = tmp_path / f"apptainer-{ranks}.env"
    env_file.write_text(text)
    command = f"apptainer exec --nv --cleanenv --env-file {env_file} /img/t.sif python"
    return {
        **IMAGE_ENV,
        "MUSHIN_APPTAINER_VERSION": "1.3.4",
        "MUSHIN_RANK_COMMAND": command,
        "MUSHIN_ENV_FILE": str(env_file),
    }


def test_reproducibility_part_is_byte_identical_at_world_size_1_2_4(tmp_path: Path) -> None:
    one, two, four = (_launch_env(tmp_path, n, f"MASTER_PORT={n}\n") for n in (1, 2, 4))
    cpu = {"torch": "2.6.0", "cuda": None, "count": 0}
    gpus = {"torch": "2.6.0", "cuda": "12.4", "count": 2, "names": ["NVIDIA H200"] * 2}
    worlds = {
        "single": _record(one, devices=1, num_nodes=1, devices_facts=cpu),
        "hydraddp-2": record_with_seeds(
            _record(two, devices=2, num_nodes=1), {r: {"base": 3, "seed": 3 + r} for r in (0, 1)}
        ),
        "torchrun-2": _record(
            {**two, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"},
            devices=2,
            num_nodes=1,
            devices_facts=gpus,
        ),
        "slurm-4": _record(
            {**four, **simulated_slurm_env(2, 2, 0)},
            devices=2,
            num_nodes=2,
            launcher={"name": "mushin_slurm", "config": {"nodes": 2}},
        ),
        "slurm-4-rank3": _record({**four, **simulated_slurm_env(2, 2, 3)}, devices=2, num_nodes=2),
    }
    blobs = {name: canonical_dumps(r["reproducibility"]) for name, r in worlds.items()}
    assert len(set(blobs.values())) == 1, blobs
    # devices, the env file and the rank command differ per world: they are run facts
    assert worlds["single"]["run"]["devices"] == cpu
    assert worlds["torchrun-2"]["run"]["devices"] == gpus
    texts = {r["run"]["container"]["env_file"]["text"] for r in worlds.values()}
    assert texts == {"MASTER_PORT=1\n", "MASTER_PORT=2\n", "MASTER_PORT=4\n"}
    # ... while the run parts say how each one ran
    sizes = {name: r["run"]["topology"]["world_size"] for name, r in worlds.items()}
    assert sizes == {
        "single": 1,
        "hydraddp-2": 2,
        "torchrun-2": 2,
        "slurm-4": 4,
        "slurm-4-rank3": 4,
    }
    assert worlds["slurm-4"]["run"]["launcher"]["config"] == {"nodes": 2}
    assert worlds["slurm-4"]["run"]["config"]["trainer.num_nodes"] == 2
    assert [r[4] for r in worlds["hydraddp-2"]["run"]["topology"]["ranks"]] == [3, 4]


def test_full_record_contents(tmp_path: Path) -> None:
    launch = _launch_env(tmp_path, 2, "# rank env\nMASTER_PORT=29500\n")
    env = {
        **simulated_slurm_env(1, 2, 0),
        "PYTHONHASHSEED": "0",
        "NCCL_DEBUG": "WARN",
        "HOME": "/root",
        **launch,
    }
    rec = _record(env, devices=2, num_nodes=1, started="2026-01-02T03:04:05.678+00:00")
    repro, run = rec["reproducibility"], rec["run"]
    assert rec["schema"] == SCHEMA == 3
    assert repro["image"] == {
        "sif_sha256": "ab" * 32,
        "sif_uuid": IMAGE_ENV["MUSHIN_SIF_UUID"],
        "definition_sha256": "cd" * 32,
        "base_digest": "sha256:" + "ef" * 32,
    }
    assert run["image"] == {"path": "/img/t.sif"}
    assert repro["env"] == {"PYTHONHASHSEED": "0"}
    assert run["env"]["NCCL_DEBUG"] == "WARN" and "HOME" not in run["env"]
    # recorded once, where they belong: not repeated in run.env
    assert not set(launch) & set(run["env"]) - {"APPTAINER_CONTAINER"}
    env_file = Path(launch["MUSHIN_ENV_FILE"])
    assert run["container"] == {
        "apptainer_version": "1.3.4",
        "rank_command": launch["MUSHIN_RANK_COMMAND"],
        "rank_argv": shlex.split(launch["MUSHIN_RANK_COMMAND"]),
        "env_file": {
            "path": str(env_file),
            "text": "# rank env\nMASTER_PORT=29500\n",
            "sha256": hashlib.sha256(env_file.read_bytes()).hexdigest(),
        },
    }
    assert run["started"] == "2026-01-02T03:04:05.678+00:00" and "time" not in run
    assert repro["package_set"] == package_set(installed_packages())
    assert repro["packages"]["hydra-core"] == importlib.metadata.version("hydra-core")
    assert repro["seed"] == {"base": 3, "scheme": "base + global_rank"}
    assert "seed" not in repro["config"]  # not repeated: it is the seed base
    assert run["launcher"]["kind"] == "slurm" and run["launcher"]["tasks"] == 2
    assert run["topology"]["nodes"] == ["node0001"]
    assert run["fingerprints"]["config"] == "whole-config-2x1"
    assert repro["config_sha256"] == hashlib.sha256(canonical_dumps(repro["config"])).hexdigest()


def test_image_from_env() -> None:
    assert image_from_env({"SINGULARITY_CONTAINER": "/x.sif"}) == {"path": "/x.sif"}
    assert image_from_env({"MUSHIN_IMAGE_BASE_DIGEST": "sha256:1"}) == {"base_digest": "sha256:1"}
    assert image_from_env({}) is None


def test_image_identity_no_image_and_a_manifest() -> None:
    assert _record({}, devices=1, num_nodes=1)["reproducibility"]["image"] == "no image"
    # in a container that did not say which image: not the same as no image at all
    inside = _record({"APPTAINER_CONTAINER": "/x.sif"}, devices=1, num_nodes=1)
    assert inside["reproducibility"]["image"] == "unidentified image"
    assert inside["run"]["image"] == {"path": "/x.sif"}
    # a build manifest: its identity is reproducibility, its build details are run facts
    manifest = {
        "sif_sha256": "1" * 64,
        "sif_uuid": "u",
        "definition_sha256": "2" * 64,
        "base_digest": "sha256:3",
        "sif_size": 10,
        "apptainer_version": "1.3.4",
        "packages": {"torch": "2.6.0"},
    }
    rec = _record({}, devices=1, num_nodes=1, image=manifest)
    assert rec["reproducibility"]["image"] == {
        "sif_sha256": "1" * 64,
        "sif_uuid": "u",
        "definition_sha256": "2" * 64,
        "base_digest": "sha256:3",
    }
    assert rec["run"]["image"] == {
        "sif_size": 10,
        "apptainer_version": "1.3.4",
        "packages": {"torch": "2.6.0"},
    }


def test_older_records_are_brought_to_the_new_shape() -> None:
    old = {"schema": 2, "reproducibility": {"image": None}, "run": {"time": "2025-01-01"}}
    out = split_provenance(old)
    assert out["reproducibility"]["image"] == "no image"
    assert out["run"]["started"] == "2025-01-01" and "time" not in out["run"]
    assert split_provenance(out) == out


# ---------------------------------------------------------------------------- packages


def test_package_set_lists_every_installed_distribution(tmp_path: Path) -> None:
    lines = installed_packages()
    names = [line.partition("==")[0] for line in lines]
    assert names == sorted(set(names))  # canonical, sorted, once each
    for dist in ("hydra-core", "hydra_zen", "attrs", "omegaconf"):
        canon = dist.replace("_", "-").lower()
        assert f"{canon}=={importlib.metadata.version(dist)}" in lines
    dists = importlib.metadata.distributions()
    every = {canonical_package_name(d.metadata["Name"]) for d in dists if d.metadata["Name"]}
    assert set(names) == every
    # the record holds the fingerprint; the list is written beside it
    rec = _record({}, devices=1, num_nodes=1)
    write_provenance(tmp_path, rec)
    listed = tmp_path / PACKAGES_FILE
    assert listed.read_text().splitlines() == list(lines)
    pset = rec["reproducibility"]["package_set"]
    assert pset["sha256"] == hashlib.sha256(listed.read_bytes()).hexdigest()
    assert pset["count"] == len(lines) and pset["file"] == PACKAGES_FILE
    assert len(canonical_dumps(rec["reproducibility"])) < 4096  # the list is not in the record
    assert packages_beside(tmp_path, rec) == list(lines)
    assert packages_beside(tmp_path / "mushin_provenance.json", rec) == list(lines)


def test_a_record_of_another_package_set(tmp_path: Path) -> None:
    other = ["numpy==1.0", "torch==2.0"]
    rec = _record({}, devices=1, num_nodes=1, packages=other)
    assert rec["reproducibility"]["packages"]["torch"] == "2.0"
    assert rec["reproducibility"]["package_set"]["count"] == 2
    write_provenance(tmp_path / "alone", rec)  # not this process's packages: no list
    assert not (tmp_path / "alone" / PACKAGES_FILE).exists()
    with pytest.raises(ValueError, match="not the package set"):
        write_provenance(tmp_path / "wrong", rec, packages=["numpy==1.0"])
    write_provenance(tmp_path / "given", rec, packages=other)
    assert (tmp_path / "given" / PACKAGES_FILE).read_text() == "numpy==1.0\ntorch==2.0\n"
    # a list that is not the record's is not used
    (tmp_path / "given" / PACKAGES_FILE).write_text("numpy==1.1\ntorch==2.0\n")
    assert packages_beside(tmp_path / "given", rec) is None


def test_package_list_is_read_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed distributions are walked once; later records reuse the list (how long
    either takes: scripts/bench/provenance_scale.py; tests never time)."""
    walks: list[int] = []
    real = importlib.metadata.distributions

    def counting() -> Any:
        walks.append(1)
        return real()

    monkeypatch.setattr(_provenance.importlib.metadata, "distributions", counting)
    _provenance.installed_packages.cache_clear()
    try:
        first = _provenance.installed_packages()
        assert _provenance.installed_packages() is first and len(walks) == 1
    finally:
        _provenance.installed_packages.cache_clear()


# ---------------------------------------------------------------------------- container


def test_env_file_and_rank_command_are_recorded_redacted(tmp_path: Path) -> None:
    env_file = tmp_path / "apptainer-x.env"
    original = (
        "# mushin-box rank environment\n"
        'SLURM_PROCID="${SLURM_PROCID:?}"\n'
        f"WANDB_API_KEY='{PLANTED_ENV}\n{PLANTED_ENV}'\n"
        f"export HF_TOKEN={PLANTED_ENV}\n"
        f"DB_URL=https://me:{PLANTED_URL}@db/x\n"
        "GREETING='it'\\''s'\n"
    )
    env_file.write_text(original)
    command = (
        f"apptainer exec --env-file {env_file} --env MY_SECRET={PLANTED_ENV} "
        f"--pwd /w '/my images/i.sif' python"
    )
    env = {"MUSHIN_ENV_FILE": str(env_file), "MUSHIN_RANK_COMMAND": command}
    container = _record(env, devices=1, num_nodes=1)["run"]["container"]
    assert container["apptainer_version"] is None
    assert container["env_file"]["sha256"] == hashlib.sha256(original.encode()).hexdigest()
    assert container["env_file"]["text"] == (
        "# mushin-box rank environment\n"
        'SLURM_PROCID="${SLURM_PROCID:?}"\n'
        f"WANDB_API_KEY={REDACTED}\n"
        f"export HF_TOKEN={REDACTED}\n"
        f"DB_URL=https://{REDACTED}@db/x\n"
        "GREETING='it'\\''s'\n"
    )
    argv = shlex.split(command)
    argv[argv.index(f"MY_SECRET={PLANTED_ENV}")] = f"MY_SECRET={REDACTED}"
    assert container["rank_argv"] == argv
    assert container["rank_command"] == shlex.join(argv)
    assert PLANTED_ENV not in json.dumps(container) and PLANTED_URL not in json.dumps(container)


def test_unreadable_env_file_is_noted_not_fatal(tmp_path: Path) -> None:
    env = {
        "MUSHIN_ENV_FILE": str(tmp_path / "gone.env"),
        "MUSHIN_APPTAINER_VERSION": "1.3.4",
        "MUSHIN_RANK_COMMAND": "apptainer exec 'unbalanced",
    }
    container = _record(env, devices=1, num_nodes=1)["run"]["container"]
    assert container["env_file"]["text"] is None and container["env_file"]["sha256"] is None
    assert "FileNotFoundError" in container["env_file"]["error"]
    assert container["rank_command"] == "apptainer exec 'unbalanced"
    assert container["rank_argv"] is None  # it does not split
    assert _record({}, devices=1, num_nodes=1)["run"]["container"] is None
    big = tmp_path / "big.env"
    big.write_text("x" * (_provenance_env.ENV_FILE_LIMIT + 1))
    env["MUSHIN_ENV_FILE"] = str(big)
    container = _record(env, devices=1, num_nodes=1)["run"]["container"]
    assert container["env_file"]["text"] is None and "over the" in container["env_file"]["error"]


def test_redact_text_keeps_what_is_not_secret() -> None:
    text = "A=1\nB='two\nlines'\nPASSWORD=\"x\ny\"\nC=3\n"
    assert redact_text(text) == f"A=1\nB='two\nlines'\nPASSWORD={REDACTED}\nC=3\n"
    # a secret forwarded by reference is no secret in the file; a default value may be one
    forwarded = 'HF_TOKEN="${HF_TOKEN:?}"\nAPI_KEY=${API_KEY}\nMY_TOKEN="${MY_TOKEN:-abc}"\n'
    assert redact_text(forwarded) == (
        f'HF_TOKEN="${{HF_TOKEN:?}}"\nAPI_KEY=${{API_KEY}}\nMY_TOKEN={REDACTED}\n'
    )


# ---------------------------------------------------------------------------- devices


def _device_run(code: str) -> dict[str, Any]:
    script = (
        "import json, sys\n"
        f"{code}\n"
        "from mushin_box._provenance.full import full_provenance\n"
        "rec = full_provenance(task=print, config={}, fingerprints={}, environ={})\n"
        "print(json.dumps({'devices': rec['run']['devices'],"
        " 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(out.stdout.splitlines()[-1])


def test_devices_only_when_torch_is_already_imported() -> None:
    without = _device_run("")
    assert without == {"devices": None, "torch": False}  # provenance did not import torch
    with_torch = _device_run("import torch")
    import torch

    devices = with_torch["devices"]
    assert devices["torch"] == str(torch.__version__)
    assert devices["cuda"] == torch.version.cuda
    if not torch.cuda.is_available():  # the CPU machines this suite runs on
        assert devices["count"] == 0 and devices["names"] == [] and devices["driver"] is None


def _fake_torch(initialized: bool) -> types.ModuleType:
    fake = types.ModuleType("torch")
    fake.__version__ = "9.9.9"  # type: ignore[attr-defined]
    fake.version = types.SimpleNamespace(cuda="12.4")  # type: ignore[attr-defined]
    fake.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: True,
        device_count=lambda: 2,
        is_initialized=lambda: initialized,
        get_device_name=lambda i: f"torch-name-{i}",
        nccl=types.SimpleNamespace(version=lambda: (2, 21, 5)),
    )
    cudnn = types.SimpleNamespace(version=lambda: 90100)
    fake.backends = types.SimpleNamespace(cudnn=cudnn)  # type: ignore[attr-defined]
    return fake


def _standin_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\n{body}\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    _provenance_env._nvidia_smi.cache_clear()


def test_gpu_devices_without_initializing_cuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _standin_smi(
        tmp_path,
        monkeypatch,
        "printf '0, GPU-aa11, NVIDIA A100, 550.54.15\\n"
        "1, GPU-bb22, NVIDIA H200, 550.54.15\\n2, GPU-cc33, NVIDIA L4, 550.54.15\\n'",
    )
    try:
        monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=False))
        facts = device_facts({"CUDA_VISIBLE_DEVICES": "GPU-bb22,0"})
        assert facts is not None
        assert facts == {
            "torch": "9.9.9",
            "cuda": "12.4",
            "nccl": "2.21.5",
            "cudnn": 90100,
            "cuda_available": True,
            "count": 2,
            "driver": "550.54.15",
            "names": ["NVIDIA H200", "NVIDIA A100"],
        }
        mig = device_facts({"CUDA_VISIBLE_DEVICES": "MIG-1,0"})
        assert mig is not None and mig["names"] is None  # not matched: no guess
        monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=True))
        initialized = device_facts({})
        assert initialized is not None
        assert initialized["names"] == ["torch-name-0", "torch-name-1"]
    finally:
        _provenance_env._nvidia_smi.cache_clear()


def test_a_hanging_nvidia_smi_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _standin_smi(tmp_path, monkeypatch, "sleep 30")
    monkeypatch.setattr(_provenance_env, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(initialized=False))
    try:
        t0 = time.monotonic()
        facts = device_facts({})
        assert time.monotonic() - t0 < 10
        assert facts is not None and facts["driver"] is None and facts["names"] is None
        assert facts["count"] == 2
    finally:
        _provenance_env._nvidia_smi.cache_clear()


def test_finish_record_sets_end_and_keeps_start_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = _record({}, devices=1, num_nodes=1, devices_facts={"torch": "1", "count": 0})
    monkeypatch.delitem(sys.modules, "torch", raising=False)  # no torch in this process now
    done = finish_record(rec, ended="2026-01-01T00:00:01.000+00:00", duration_s=1.5)
    assert done["run"]["devices"] == {"torch": "1", "count": 0}
    assert done["run"]["ended"] == "2026-01-01T00:00:01.000+00:00"
    assert done["run"]["duration_s"] == 1.5
    assert done["reproducibility"] == rec["reproducibility"]
    later = finish_record(rec, ended="x", devices={"torch": "2", "count": 1})
    assert later["run"]["devices"] == {"torch": "2", "count": 1}


def test_record_with_seeds_fills_ranks_and_base(tmp_path: Path) -> None:
    rec = full_provenance(
        task=task,
        config={"lr": 1},
        fingerprints={},
        environ={},
        topology=simulate_topology(1, 2),
    )
    assert rec["reproducibility"]["seed"]["base"] is None
    seeds = {0: {"base": 7, "rank": 0, "seed": 7}, 1: {"base": 7, "rank": 1, "seed": 8}}
    out = record_with_seeds(rec, seeds)
    assert out["reproducibility"]["seed"]["base"] == 7
    assert [r[4] for r in out["run"]["topology"]["ranks"]] == [7, 8]
    assert seeds_from_records(seeds) == {0: 7, 1: 8}
    write_provenance(tmp_path, out)
    assert read_json(tmp_path / "mushin_provenance.json") == out


def test_write_provenance_survives_an_unserializable_config(tmp_path: Path) -> None:
    rec = {"schema": 2, "reproducibility": {"config": {"x": object()}}, "run": {}}
    path = write_provenance(tmp_path, rec)
    assert "not JSON-serializable" in read_json(path)["reproducibility"]["config"]


def test_write_provenance_of_a_big_world(tmp_path: Path) -> None:
    rec = {"run": {"topology": simulate_topology(64, 4, seed_base=3).to_dict()}}
    rec["run"]["topology"]["ranks"][5][3] = "bad\udc80host"  # a lone surrogate
    assert write_provenance(tmp_path, rec).read_bytes() == canonical_dumps(rec)


# ---------------------------------------------------------------------------- secrets

PLANTED_ENV = "PLANTED-env-d41d8cd9"
PLANTED_CFG = "PLANTED-cfg-8f00b204"
PLANTED_URL = "PLANTED-url-e9800998"


def test_scrub_redacts_keys_and_url_credentials() -> None:
    value = {"password": "x", "db": [f"postgres://u:{PLANTED_URL}@h/db"], "n": None}
    out = redact(value)
    assert out == {"password": REDACTED, "db": [f"postgres://{REDACTED}@h/db"], "n": None}


def test_planted_secrets_never_reach_any_file_or_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant secrets in the environment and the config; build, write and diff records (in
    process and through the CLI); no file written and no output contains them."""
    monkeypatch.setenv("MY_API_TOKEN", PLANTED_ENV)
    monkeypatch.setenv("NCCL_IB_PASSWORD", PLANTED_ENV)  # captured by default (NCCL_*)
    monkeypatch.setenv("MUSHIN_DB_URL", f"https://me:{PLANTED_URL}@db.example/x")
    env_file = tmp_path / "apptainer.env"  # what every rank's apptainer exec read
    env_file.write_text(f"WANDB_API_KEY={PLANTED_ENV}\nDB=https://u:{PLANTED_URL}@h/x\n")
    monkeypatch.setenv("MUSHIN_ENV_FILE", str(env_file))
    monkeypatch.setenv("MUSHIN_RANK_COMMAND", f"apptainer exec --env TOKEN={PLANTED_ENV} i.sif")
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
        rec = full_provenance(
            task=task,
            config=cfg,
            fingerprints=FINGERPRINTS,
            launcher={"name": "x", "config": {"password": PLANTED_CFG}},
            **kw,
        )
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
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "COLUMNS": "300"},
            )
            assert proc.returncode in (0, 1), proc.stderr
            outputs += [proc.stdout, proc.stderr]
    written = [p for p in out.rglob("*") if p.is_file()]
    assert sorted(p.name for p in written) == sorted(
        ["mushin_packages.txt", "mushin_provenance.json"] * 2
    )
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
    """A sweep cell's record: full, completed after the task, its package list beside it."""
    from mushin_box import Workflow, multirun
    from mushin_box._results.diff import diff_provenance

    Workflow(seeded_task).run(
        working_dir=tmp_path / "a", progress=False, lr=0.1, seed=multirun([5])
    )
    cell = tmp_path / "a" / "seed=5"
    record = read_json(cell / "mushin_provenance.json")
    status = read_json(cell / "mushin_status.json")
    assert record["schema"] == SCHEMA
    run = record["run"]
    assert run["started"] == status["started"]
    assert status["started"] <= run["ended"] <= status["ended"]
    assert 0 <= run["duration_s"] <= status["duration_s"]
    import torch  # the task seeded torch: its process had torch imported by the end

    assert run["devices"]["torch"] == str(torch.__version__)
    assert run["devices"]["count"] == torch.cuda.device_count()
    assert packages_beside(cell, record) == list(installed_packages())
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
    from mushin_box._provenance.full import full_provenance
    from mushin_box._core.sidecars import canonical_dumps

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
        "own": dict(zip(topo["rank_columns"], topo["ranks"][0])),  # its own row only
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
            [
                "srun",
                f"--nodes={nodes}",
                f"--ntasks-per-node={per_node}",
                "--time=2",
                sys.executable,
                str(script),
                str(per_node),
                str(nodes),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=tmp_path,
        )
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


# ---------------------------------------------------------------------------- the rank wrapper


def test_what_the_rank_wrapper_writes_is_what_the_record_holds(tmp_path: Path) -> None:
    """The env file of :func:`mushin_box._container.rankwrap.plan_env_file`, as a rank sees it."""
    from mushin_box._container.launchspec import IMAGE_IDENTITY_VARS, ContainerLaunch, ImageIdentity
    from mushin_box._container.rankwrap import plan_env_file, rank_argv

    identity = ImageIdentity(
        sif_sha256="ab" * 32,
        sif_uuid="00000000-0000-0000-0000-000000000000",
        definition_sha256="cd" * 32,
        base_digest="sha256:" + "ef" * 32,
        apptainer_version="1.3.4",
    )
    # HF_TOKEN: a secret, forwarded by reference
    spec = ContainerLaunch(
        image="/img/t.sif", project_dir=str(tmp_path), infiniband=False, env={"HF_TOKEN": None}
    )
    work = tmp_path / "runs"
    planned = plan_env_file(spec, working_dir=work, identity=identity)
    Path(planned.path).parent.mkdir(parents=True)
    Path(planned.path).write_text(planned.text)
    assignments = dict(
        shlex.split(line)[0].split("=", 1)
        for line in planned.text.splitlines()
        if line.startswith("MUSHIN_")
    )  # what apptainer exports to the rank
    assert set(IMAGE_IDENTITY_VARS.values()) <= set(assignments)
    rec = _record(assignments, devices=1, num_nodes=1)
    assert rec["reproducibility"]["image"] == {
        "sif_sha256": "ab" * 32,
        "sif_uuid": "00000000-0000-0000-0000-000000000000",
        "definition_sha256": "cd" * 32,
        "base_digest": "sha256:" + "ef" * 32,
    }
    container = rec["run"]["container"]
    assert container["apptainer_version"] == "1.3.4"
    assert container["rank_argv"] == rank_argv(spec, planned.path, working_dir=work)
    assert container["env_file"] == {
        "path": planned.path,
        "sha256": hashlib.sha256(planned.text.encode()).hexdigest(),
        "text": planned.text,  # nothing to redact: the secret is only named
    }
    assert 'HF_TOKEN="${HF_TOKEN:?}"' in container["env_file"]["text"]


def _pre(cfg: object) -> None:
    return None


def test_the_record_says_where_its_task_and_pre_call_are_defined() -> None:
    # _provenance builds the whole record: run.task is not patched in by the sweep later
    from mushin_box._provenance.full import full_provenance

    record = full_provenance(
        task=_pre, config={"lr": 1}, fingerprints={}, pre_call=_pre, environ={}
    )
    located = record["run"]["task"]
    assert located["task"]["module"] == __name__ and located["task"]["qualname"] == "_pre"
    assert located["pre_call"]["qualname"] == "_pre"
    assert located["task"]["file"] == str(Path(__file__).resolve())


def test_a_module_named_deeper_than_its_path_loads_from_no_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # an alias in sys.modules: a dotted name with more parts than its file has parents
    from mushin_box._provenance.task import load_callable

    module = types.ModuleType("a.b.c.d.e.f.g")
    module.__file__ = "/m.py"
    module.task = len  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "a.b.c.d.e.f.g", module)
    assert load_callable({"module": "a.b.c.d.e.f.g", "qualname": "task"}) == (len, None)
