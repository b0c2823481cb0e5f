# SPDX-License-Identifier: MIT
"""The full provenance record: the basic record, split canonically into two parts.

``reproducibility`` holds what must match for two runs to be the same experiment (code,
the config *without* its run-shape keys, seed base, package set, versions, image identity,
numerics variables); ``run`` what may differ (host, times, the world, the launcher,
devices, container, environment). So one experiment run at world size 1, 2 and 4 has a
byte-identical ``reproducibility``. Secrets are redacted everywhere
(:func:`mushin_box._core.redact.redact`); :func:`split_provenance` brings any record, an
older one too, to this shape.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mushin_box._core.layout import (
    CONTAINER_ENV,
    DDP_SPEC_ENV,
    IMAGE_IDENTITY_ENV,
    IMAGE_RECIPE_ENV,
    RDZV_ENV,
)
from mushin_box._core.redact import redact
from mushin_box._core.sidecars import canonical_dumps
from mushin_box._provenance.elastic import elastic_from_env
from mushin_box._provenance.env import (
    NO_IMAGE,
    container_from_env,
    device_facts,
    image_from_env,
    split_image,
)
from mushin_box._provenance.record import basic_provenance, key_versions, package_set
from mushin_box._provenance.task import in_image, task_locator
from mushin_box._provenance.topology import RANK_COLUMNS, Topology, topology_from_env

#: 3: ``package_set``, image identity / "no image", ``run.devices``, ``run.container``,
#: ``run.started``/``ended``/``duration_s`` (2: the two-part split; 1: the basic record)
SCHEMA = 3
SEED_SCHEME = "base + global_rank"
#: dotted config paths (fnmatch) that describe the run's shape, not the experiment (a
#: path that matches moves whole: nothing under it is matched again)
RUN_CONFIG_PATTERNS: tuple[str, ...] = (
    "trainer.devices",
    "trainer.num_nodes",
    "*.trainer.devices",
    "*.trainer.num_nodes",
    "hydra.launcher",
    "launcher",
    "launcher_config",
)
#: keys that are run shape under any config node whose ``_target_`` names a Trainer
_TRAINER_RUN_KEYS = frozenset({"devices", "num_nodes"})
#: a Trainer's keys that only bound how long it trains: a larger one extends the same fit
#: (``resume DIR --set trainer.max_epochs=N``), so a comparison names them on their own
TRAINER_LIMIT_KEYS = frozenset({"max_epochs", "max_steps", "max_time"})
#: environment variables that change numerics: part of ``reproducibility``
REPRO_ENV: tuple[str, ...] = (
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
)
#: environment variables (fnmatch) recorded in ``run.env``
ENV_CAPTURE: tuple[str, ...] = (
    "NCCL_*",
    "CUDA_*",
    "TORCH_*",
    "OMP_*",
    "MKL_*",
    "SLURM_*",
    "SLURMD_NODENAME",
    "APPTAINER*",
    "SINGULARITY*",
    "MUSHIN_*",
    "PL_*",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "NODE_RANK",
    "GROUP_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_WORLD_SIZE",
)
#: recorded elsewhere (image identity, container launch) or internal
_ENV_SKIP = frozenset(
    {DDP_SPEC_ENV, *IMAGE_IDENTITY_ENV.values(), *IMAGE_RECIPE_ENV.values()}
    | {*CONTAINER_ENV.values(), *REPRO_ENV}
)


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    if not patterns:
        return lambda path: False
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    return lambda path: regex.match(path) is not None


def split_config(
    config: Any,
    patterns: Sequence[str] = RUN_CONFIG_PATTERNS,
    trainer_keys: frozenset[str] = _TRAINER_RUN_KEYS,
) -> tuple[Any, dict[str, Any]]:
    """(experiment config, ``{dotted path: value}`` of the keys matching ``patterns``, and of
    ``trainer_keys`` under a node whose ``_target_`` names a ``...Trainer``).

    >>> cfg = {"lr": 0.1, "trainer": {"_target_": "pytorch_lightning.Trainer",
    ...                               "devices": 4, "num_nodes": 2, "max_epochs": 3}}
    >>> kept, moved = split_config(cfg)
    >>> kept
    {'lr': 0.1, 'trainer': {'_target_': 'pytorch_lightning.Trainer', 'max_epochs': 3}}
    >>> moved
    {'trainer.devices': 4, 'trainer.num_nodes': 2}
    """
    match = _matcher(patterns)
    moved: dict[str, Any] = {}

    def walk(node: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        target = node.get("_target_")
        trainer = isinstance(target, str) and target.rsplit(".", 1)[-1].endswith("Trainer")
        out: dict[str, Any] = {}
        for key, value in node.items():
            path = f"{prefix}{key}"
            if match(path) or (trainer and key in trainer_keys):
                moved[path] = value
            elif isinstance(value, Mapping):
                out[key] = walk(value, f"{path}.")
            else:
                out[key] = value
        return out

    if not isinstance(config, Mapping):
        return config, moved
    return walk(config, ""), moved


def training_limits(config: Any) -> dict[str, Any]:
    """``{dotted path: value}`` of the :data:`TRAINER_LIMIT_KEYS` of the config's Trainers.

    >>> training_limits({"trainer": {"_target_": "lightning.Trainer", "max_epochs": 3},
    ...                  "model": {"max_steps": 9}})
    {'trainer.max_epochs': 3}
    """
    return split_config(config, (), TRAINER_LIMIT_KEYS)[1]


def _sha256(value: Any) -> str | None:
    try:
        return hashlib.sha256(canonical_dumps(value)).hexdigest()
    except (TypeError, ValueError):
        return None


def split_provenance(record: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical two-part form of a provenance record (basic or full; idempotent).

    A schema-1 record's config hash moves to ``run.fingerprints.config``; both parts are
    redacted, except the rank rows of ``run.topology`` (numbers and host names only).

    >>> rec = {"schema": 1, "reproducibility": {"config": {"seed": 3, "trainer":
    ...        {"devices": 2}}, "config_sha256": "abc", "seed_base": 3}, "run": {}}
    >>> out = split_provenance(rec)
    >>> out["reproducibility"]["config"], out["reproducibility"]["seed"]["base"]
    ({'trainer': {}}, 3)
    >>> out["run"]["config"], out["run"]["fingerprints"]
    ({'trainer.devices': 2}, {'config': 'abc'})
    >>> split_provenance(out) == out
    True
    """
    schema = record.get("schema", 1)
    repro = dict(record.get("reproducibility") or {})
    run = dict(record.get("run") or {})
    topology = run.pop("topology", None)
    old_seed = repro.pop("seed", None)
    base = repro.pop("seed_base", None)
    if base is None and isinstance(old_seed, Mapping):
        base = old_seed.get("base")
    config = repro.get("config")
    if isinstance(config, Mapping):
        kept, moved = split_config(config)
        if base is not None and isinstance(kept, dict) and kept.get("seed") == base:
            kept.pop("seed")
        repro["config"] = kept
        if moved:
            run["config"] = {**dict(run.get("config") or {}), **moved}
    old_hash = repro.pop("config_sha256", None)
    if not (isinstance(schema, int) and schema >= 2) and old_hash is not None:
        run["fingerprints"] = {**dict(run.get("fingerprints") or {}), "config": old_hash}
    repro["config_sha256"] = _sha256(redact(repro.get("config")))
    repro["seed"] = {"base": base, "scheme": SEED_SCHEME}
    if "image" in repro and repro["image"] is None:
        repro["image"] = NO_IMAGE
    if "time" in run and "started" not in run:
        run["started"] = run.pop("time")
    out_run = redact(run)
    if topology is not None:
        if isinstance(topology, Mapping):
            ranks = topology.get("ranks")
            topology = redact({k: v for k, v in topology.items() if k != "ranks"})
            topology["ranks"] = ranks
        out_run["topology"] = topology
    schema = max(SCHEMA, schema) if isinstance(schema, int) else SCHEMA
    return {**record, "schema": schema, "reproducibility": redact(repro), "run": out_run}


def seeds_from_records(records: Mapping[int, Mapping[str, Any]]) -> dict[int, int]:
    """``{rank: seed}`` of :func:`mushin_box._train.seeding.seed_records`' output.

    >>> seeds_from_records({0: {"rank": 0, "seed": 7}, 1: {"rank": 1, "seed": 8}})
    {0: 7, 1: 8}
    """
    seeds = {int(rank): rec.get("seed") for rank, rec in records.items()}
    return {rank: s for rank, s in seeds.items() if isinstance(s, int) and not isinstance(s, bool)}


def record_with_seeds(
    record: Mapping[str, Any], records: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """A copy of a full record with the ranks' seeds filled in, and, when it has no seed
    base yet (no config ``seed``), the base the ranks seeded from.

    >>> rec = {"reproducibility": {"seed": {"base": None}}, "run": {"topology": {
    ...     "rank_columns": ["global_rank", "seed"], "ranks": [[0, None], [1, None]]}}}
    >>> out = record_with_seeds(rec, {0: {"base": 5, "seed": 5}, 1: {"base": 5, "seed": 6}})
    >>> out["reproducibility"]["seed"]["base"], out["run"]["topology"]["ranks"]
    (5, [[0, 5], [1, 6]])
    """
    seeds = seeds_from_records(records)
    repro = dict(record.get("reproducibility") or {})
    run = dict(record.get("run") or {})
    seed: dict[str, Any] = dict(repro.get("seed") or {"scheme": SEED_SCHEME})
    bases = {r.get("base") for r in records.values()}
    if seed.get("base") is None and len(bases) == 1:
        (only,) = bases
        if isinstance(only, int) and not isinstance(only, bool):
            seed["base"] = only
    repro["seed"] = seed
    topology = run.get("topology")
    if isinstance(topology, Mapping) and isinstance(topology.get("ranks"), list):
        columns = list(topology.get("rank_columns") or RANK_COLUMNS)
        g, k = columns.index("global_rank"), columns.index("seed")
        ranks = [
            [*row[:k], seeds.get(row[g], row[k]), *row[k + 1 :]] if isinstance(row, list) else row
            for row in topology["ranks"]
        ]
        run["topology"] = {**topology, "ranks": ranks}
    return {**record, "reproducibility": repro, "run": run}


def launcher_from_hydra() -> dict[str, Any] | None:
    """The running Hydra job's launcher (``{"name": ..., "config": {...}}``), if any."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    try:
        config = OmegaConf.to_container(hc.launcher, resolve=True, enum_to_str=True)
    except Exception:  # an interpolation that does not resolve here
        config = OmegaConf.to_container(hc.launcher, resolve=False, enum_to_str=True)
    name = hc.runtime.choices.get("hydra/launcher") if hc.runtime.choices else None
    return {"name": name, "config": config}


def full_provenance(
    *,
    task: Callable[..., Any],
    config: Any,
    fingerprints: Mapping[str, str],
    seed_base: Any = None,
    topology: Topology | None = None,
    environ: Mapping[str, str] | None = None,
    launcher: Mapping[str, Any] | None = None,
    image: Mapping[str, Any] | None = None,
    env_capture: Sequence[str] = ENV_CAPTURE,
    base: Mapping[str, Any] | None = None,
    packages: Sequence[str] | None = None,
    devices: Mapping[str, Any] | None = None,
    container: Mapping[str, Any] | None = None,
    started: str | None = None,
    pre_call: Callable[..., Any] | None = None,
    experiment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full, canonical (:func:`split_provenance`), redacted record of one cell (or rank).

    ``base``: a record built earlier in this process, whose git state, package set and run
    facts are reused (``config`` and ``seed_base``, when given, replace its own). Each
    fact not given is read from ``environ`` (default ``os.environ``) and this process.

    >>> def task(lr: float) -> dict: return {"loss": lr}
    >>> cfg = {"lr": 0.1, "seed": 0, "trainer": {"devices": 2}}
    >>> one = full_provenance(task=task, config=cfg, fingerprints={}, seed_base=0,
    ...                       environ={"SLURM_PROCID": "0", "SLURM_NTASKS": "1",
    ...                                "SLURM_JOB_NODELIST": "n1"})
    >>> one["reproducibility"]["config"], one["run"]["topology"]["world_size"]
    ({'lr': 0.1, 'trainer': {}}, 1)
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    if base is None:
        basic = basic_provenance(
            task=task,
            config=config,
            fingerprints=fingerprints,
            seed_base=seed_base,
            pre_call=pre_call,
            experiment=experiment,
        )
    else:
        basic = dict(base)
    repro = dict(basic.get("reproducibility") or {})
    run = dict(basic.get("run") or {})
    if base is not None:  # reuse the expensive parts; this cell's config and seed win
        if config is not None:
            repro["config"] = redact(config)
        if seed_base is not None:
            repro.pop("seed", None)
            repro["seed_base"] = seed_base
        run["task"] = task_locator(task, pre_call)
    if packages is not None:
        repro["package_set"] = package_set(packages)
        repro["packages"] = key_versions(packages)
    if topology is None:  # HydraDDP's rank 0: the ranks its config's first int devices asks
        moved = split_config(repro.get("config"))[1].items()
        ints = (v for p, v in moved if p.rpartition(".")[2] == "devices" and isinstance(v, int))
        hint = next(ints, None)
        topology = topology_from_env(env, devices=None if isinstance(hint, bool) else hint)

    repro["image"], located = split_image(image if image is not None else image_from_env(env))
    if located:
        run["image"] = located
    else:
        run.pop("image", None)
    repro["env"] = {k: env[k] for k in REPRO_ENV if k in env}

    capture = _matcher(env_capture)
    run["env"] = redact({k: v for k, v in sorted(env.items()) if k not in _ENV_SKIP and capture(k)})
    run["launcher"] = {
        "kind": topology.launcher,
        "name": (launcher or {}).get("name"),
        "config": (launcher or {}).get("config"),
        "nodes": topology.num_nodes,
        "tasks": topology.world_size,
        "gpus_per_node": topology.gpus_per_node,
    }
    run["topology"] = topology.to_dict()
    elastic = elastic_from_env(env)
    if elastic is not None:
        run["elastic"] = {**elastic, "world_size": topology.world_size}
    rendezvous = {k: env[v] for k, v in RDZV_ENV.items() if k != "nodes" and env.get(v)}
    if rendezvous:  # torchrun's: {"backend", "endpoint", "id"}, as the agent exported them
        run["rendezvous"] = rendezvous
    run["fingerprints"] = {**dict(run.get("fingerprints") or {}), **dict(fingerprints)}
    run["devices"] = dict(devices) if devices is not None else device_facts(env)
    run["container"] = dict(container) if container is not None else container_from_env(env)
    if isinstance(repro["image"], dict):  # a task from a host directory is not the image's
        file = ((run.get("task") or {}).get("task") or {}).get("file")
        argv = (run["container"] or {}).get("rank_argv")
        where = "image" if in_image(file, argv, env.get("HOME")) else "host"
        repro["code"] = {**dict(repro.get("code") or {}), "task_from": where}
    if started is not None:
        run["started"] = started
        run.pop("time", None)
    record = {**basic, "reproducibility": repro, "run": run}
    return split_provenance(record)


def finish_record(
    record: Mapping[str, Any],
    *,
    ended: str,
    duration_s: float | None = None,
    devices: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A copy of a record completed when the cell's task has ended; the devices are read
    again (the task has usually imported torch by now), else kept from the start.

    >>> rec = {"reproducibility": {}, "run": {"started": "2026-01-01T00:00:00.000+00:00",
    ...                                       "devices": None}}
    >>> out = finish_record(rec, ended="2026-01-01T00:01:00.000+00:00", duration_s=60.0,
    ...                     devices={"torch": "2.6.0", "count": 0})
    >>> out["run"]["ended"], out["run"]["duration_s"], out["run"]["devices"]["count"]
    ('2026-01-01T00:01:00.000+00:00', 60.0, 0)
    """
    run = dict(record.get("run") or {})
    now = dict(devices) if devices is not None else device_facts()
    if now is not None or "devices" not in run:
        run["devices"] = now
    return {**record, "run": {**run, "ended": ended, "duration_s": duration_s}}
