# SPDX-License-Identifier: MIT
"""The full provenance record: the basic record, split canonically into two parts.

``reproducibility`` holds what must match for two runs to be the same experiment: code
(git state, task source hash), the config *without* its run-shape keys, the seed base,
package and python versions, the image and the few environment variables that change
numerics. ``run`` holds what may differ: host, pid, time, the world topology (nodes,
ranks, per-rank seeds), the Trainer's ``devices``/``num_nodes``, the launcher and its
nodes/tasks/GPUs, the captured environment. So one experiment run at world size 1, 2
and 4 has a byte-identical ``canonical_dumps(record["reproducibility"])``.

Secrets are redacted everywhere: values of secret-looking keys and environment variables
(:func:`mushin_box._provenance.is_secret_name`) and credentials inside URLs
(``https://user:pass@host`` → ``https://<redacted>@host``).

:func:`split_provenance` is the canonical form: it turns any record (the basic schema-1
one that older cells hold, or a full one) into the same shape, so the diff can compare
them; it is idempotent.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._provenance import REDACTED, basic_provenance, is_secret_name, redact
from mushin_box._sidecars import canonical_dumps, write_bytes_atomic
from mushin_box._topology import RANK_COLUMNS, Topology, topology_from_env

__all__ = [
    "ENV_CAPTURE",
    "IMAGE_RUN_KEYS",
    "REPRO_ENV",
    "RUN_CONFIG_PATTERNS",
    "SCHEMA",
    "SEED_SCHEME",
    "full_provenance",
    "image_from_env",
    "launcher_from_hydra",
    "provenance_bytes",
    "record_with_seeds",
    "scrub",
    "seeds_from_records",
    "split_config",
    "split_provenance",
    "write_provenance",
]

SCHEMA = 2
SEED_SCHEME = "base + global_rank"
#: dotted config paths (fnmatch) that describe the run's shape, not the experiment
RUN_CONFIG_PATTERNS: tuple[str, ...] = (
    "trainer.devices",
    "trainer.num_nodes",
    "*.trainer.devices",
    "*.trainer.num_nodes",
    "hydra.launcher",
    "hydra.launcher.*",
    "launcher",
    "launcher.*",
    "launcher_config",
    "launcher_config.*",
)
#: keys that are run shape under any config node whose ``_target_`` names a Trainer
_TRAINER_RUN_KEYS = frozenset({"devices", "num_nodes"})
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
_ENV_SKIP = frozenset({"MUSHIN_DDP_SPEC", "MUSHIN_SIF_SHA256", *REPRO_ENV})
#: keys of an image description that locate a copy rather than identify the image
IMAGE_RUN_KEYS = frozenset({"path", "sif_path", "built_at", "build_host", "created"})
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


# ---------------------------------------------------------------------------- redaction


def _scrub_strings(value: Any) -> Any:
    if isinstance(value, str):
        if "@" in value and "://" in value:
            return _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)
        return value
    if isinstance(value, Mapping):
        return {k: _scrub_strings(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_strings(v) for v in value]
    return value


def scrub(value: Any) -> Any:
    """:func:`~mushin_box._provenance.redact`, plus credentials inside URLs.

    Examples
    --------
    >>> scrub({"db": {"password": "hunter2", "url": "postgres://me:pw@db/x"}, "lr": 0.1})
    {'db': {'password': '<redacted>', 'url': 'postgres://<redacted>@db/x'}, 'lr': 0.1}
    """
    return _scrub_strings(redact(value))


def _scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if is_secret_name(k) else _scrub_strings(v) for k, v in env.items()}


# ---------------------------------------------------------------------------- config split


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool]:
    if not patterns:
        return lambda path: False
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
    return lambda path: regex.match(path) is not None


def _is_trainer(node: Mapping[str, Any]) -> bool:
    target = node.get("_target_")
    return isinstance(target, str) and target.rsplit(".", 1)[-1].endswith("Trainer")


def split_config(
    config: Any, patterns: Sequence[str] = RUN_CONFIG_PATTERNS
) -> tuple[Any, dict[str, Any]]:
    """Split a config into (experiment config, ``{dotted path: value}`` of run-shape keys).

    Run-shape keys are those whose dotted path matches one of ``patterns`` (fnmatch, ``*``
    spans dots) and ``devices``/``num_nodes`` under any node whose ``_target_`` names a
    ``...Trainer``. The input is not modified.

    Examples
    --------
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
        trainer = _is_trainer(node)
        out: dict[str, Any] = {}
        for key, value in node.items():
            path = f"{prefix}{key}"
            if match(path) or (trainer and key in _TRAINER_RUN_KEYS):
                moved[path] = value
            elif isinstance(value, Mapping):
                out[key] = walk(value, f"{path}.")
            else:
                out[key] = value
        return out

    if not isinstance(config, Mapping):
        return config, moved
    return walk(config, ""), moved


# ---------------------------------------------------------------------------- the split


def _sha256(value: Any) -> str | None:
    try:
        return hashlib.sha256(canonical_dumps(value)).hexdigest()
    except (TypeError, ValueError):
        return None


def split_provenance(
    record: Mapping[str, Any], *, patterns: Sequence[str] = RUN_CONFIG_PATTERNS
) -> dict[str, Any]:
    """The canonical two-part form of a provenance record (basic or full; idempotent).

    * run-shape config keys (:func:`split_config`) move to ``run.config``;
    * the seed base becomes ``reproducibility.seed = {"base": ..., "scheme": ...}``, and a
      top-level config ``seed`` equal to it is not repeated in the config;
    * ``reproducibility.config_sha256`` is the sha256 of the canonical (redacted) config
      that stays; a schema-1 record's hash of the whole config moves to
      ``run.fingerprints.config``;
    * secrets are redacted in both parts (:func:`scrub`), except the per-rank rows of
      ``run.topology`` (numbers and host names only).

    Examples
    --------
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
        kept, moved = split_config(config, patterns)
        if base is not None and isinstance(kept, dict) and kept.get("seed") == base:
            kept.pop("seed")
        repro["config"] = kept
        if moved:
            run["config"] = {**dict(run.get("config") or {}), **moved}
    old_hash = repro.pop("config_sha256", None)
    if not (isinstance(schema, int) and schema >= 2) and old_hash is not None:
        run["fingerprints"] = {**dict(run.get("fingerprints") or {}), "config": old_hash}
    repro["config_sha256"] = _sha256(scrub(repro.get("config")))
    repro["seed"] = {"base": base, "scheme": SEED_SCHEME}
    out_run = scrub(run)
    if topology is not None:
        if isinstance(topology, Mapping):
            ranks = topology.get("ranks")
            topology = scrub({k: v for k, v in topology.items() if k != "ranks"})
            topology["ranks"] = ranks
        out_run["topology"] = topology
    out: dict[str, Any] = {k: v for k, v in record.items() if k not in ("reproducibility", "run")}
    out["schema"] = max(SCHEMA, schema) if isinstance(schema, int) else SCHEMA
    out["reproducibility"] = scrub(repro)
    out["run"] = out_run
    return out


# ---------------------------------------------------------------------------- sources


def image_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The container image a rank runs in, from the env file / Apptainer's variables.

    ``MUSHIN_SIF_SHA256`` (written into the env file by the launcher) identifies the
    image; ``APPTAINER_CONTAINER``/``SINGULARITY_CONTAINER`` is where this copy lives.

    Examples
    --------
    >>> image_from_env({"MUSHIN_SIF_SHA256": "ab12", "APPTAINER_CONTAINER": "/i/x.sif"})
    {'sif_sha256': 'ab12', 'path': '/i/x.sif'}
    >>> image_from_env({}) is None
    True
    """
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    if env.get("MUSHIN_SIF_SHA256"):
        out["sif_sha256"] = env["MUSHIN_SIF_SHA256"]
    path = env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER")
    if path:
        out["path"] = path
    return out or None


def seeds_from_records(records: Mapping[int, Mapping[str, Any]]) -> dict[int, int]:
    """``{rank: seed}`` from :func:`mushin_box._seeding.seed_records`' output.

    Examples
    --------
    >>> seeds_from_records({0: {"rank": 0, "seed": 7}, 1: {"rank": 1, "seed": 8}})
    {0: 7, 1: 8}
    """
    out: dict[int, int] = {}
    for rank, rec in records.items():
        seed = rec.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            out[int(rank)] = seed
    return out


def record_with_seeds(
    record: Mapping[str, Any], records: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """A copy of a full record with the per-rank seeds of ``records`` filled in.

    ``records`` is :func:`mushin_box._seeding.seed_records`' output (read after the task
    ran). When the record has no seed base yet (the config has no ``seed``), the base the
    ranks seeded from is recorded as ``reproducibility.seed.base``.

    Examples
    --------
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
    try:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - hydra is a dependency
        return None
    if not HydraConfig.initialized():
        return None
    hc = HydraConfig.get()
    try:
        config = OmegaConf.to_container(hc.launcher, resolve=True, enum_to_str=True)
    except Exception:  # an interpolation that does not resolve here
        config = OmegaConf.to_container(hc.launcher, resolve=False, enum_to_str=True)
    name = hc.runtime.choices.get("hydra/launcher") if hc.runtime.choices else None
    return {"name": name, "config": config}


def _devices_hint(moved: Mapping[str, Any]) -> int | None:
    for path, value in moved.items():
        if path.rsplit(".", 1)[-1] == "devices" and isinstance(value, int):
            return value if not isinstance(value, bool) else None
    return None


# ---------------------------------------------------------------------------- the record


def full_provenance(
    *,
    task: Callable[..., Any],
    config: Any,
    fingerprints: Mapping[str, str],
    seed_base: Any = None,
    topology: Topology | None = None,
    seeds: Mapping[int, int] | None = None,
    environ: Mapping[str, str] | None = None,
    launcher: Mapping[str, Any] | None = None,
    image: Mapping[str, Any] | None = None,
    patterns: Sequence[str] = RUN_CONFIG_PATTERNS,
    env_capture: Sequence[str] = ENV_CAPTURE,
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The full, canonical two-part provenance record of one cell (or one rank).

    Parameters
    ----------
    task, config, fingerprints, seed_base
        As for :func:`mushin_box._provenance.basic_provenance` (``config``: the plain,
        unresolved job config).
    topology : Topology, optional
        The world; default :func:`~mushin_box._topology.topology_from_env` on ``environ``
        (with the Trainer's ``devices`` from the config for HydraDDP's rank 0).
    seeds : Mapping[int, int], optional
        ``{global_rank: seed}`` to record per rank (see :func:`seeds_from_records`).
    environ : Mapping[str, str], optional
        The environment to read (default ``os.environ``).
    launcher : Mapping, optional
        The launcher, e.g. :func:`launcher_from_hydra` (``{"name": ..., "config": ...}``).
    image : Mapping, optional
        The image's identity (e.g. its build manifest); default :func:`image_from_env`.
        Keys in :data:`IMAGE_RUN_KEYS` (``path``...) go to ``run.image``.
    patterns : sequence of str
        Run-shape config paths (:data:`RUN_CONFIG_PATTERNS`).
    env_capture : sequence of str
        Environment variables recorded in ``run.env`` (fnmatch; :data:`ENV_CAPTURE`).
    base : Mapping, optional
        A record built earlier in this process (e.g. for another rank or cell): its git
        state, package versions and run facts are reused, skipping the look-ups; ``config``
        and ``seed_base``, when given, replace its own.

    Returns
    -------
    dict
        ``{"schema": 2, "reproducibility": {...}, "run": {...}}``, canonical
        (:func:`split_provenance`) and redacted.

    Examples
    --------
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
            task=task, config=config, fingerprints=fingerprints, seed_base=seed_base
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
    _, moved = split_config(repro.get("config"), patterns)
    if topology is None:
        topology = topology_from_env(env, seeds=seeds, devices=_devices_hint(moved))
    elif seeds:
        topology = topology.with_seeds(seeds)

    image_info = dict(image) if image is not None else image_from_env(env)
    if image_info is not None:
        repro["image"] = {k: v for k, v in image_info.items() if k not in IMAGE_RUN_KEYS}
        located = {k: v for k, v in image_info.items() if k in IMAGE_RUN_KEYS}
        if located:
            run["image"] = located
    else:
        repro["image"] = None
    repro["env"] = {k: env[k] for k in REPRO_ENV if k in env}

    capture = _matcher(env_capture)
    run["env"] = _scrub_env(
        {k: v for k, v in sorted(env.items()) if k not in _ENV_SKIP and capture(k)}
    )
    run["launcher"] = {
        "kind": topology.launcher,
        "name": (launcher or {}).get("name"),
        "config": (launcher or {}).get("config"),
        "nodes": topology.num_nodes,
        "tasks": topology.world_size,
        "gpus_per_node": topology.gpus_per_node,
    }
    run["topology"] = topology.to_dict()
    run["fingerprints"] = {**dict(run.get("fingerprints") or {}), **dict(fingerprints)}
    record = {**basic, "reproducibility": repro, "run": run}
    return split_provenance(record, patterns=patterns)


_PLAIN = (int, str, type(None))


def _plain_rows(ranks: Any) -> bool:
    """Rank rows that ``json.dumps`` writes exactly as ``canonical_dumps`` would."""
    if not isinstance(ranks, list):
        return False
    for row in ranks:
        if type(row) is not list:
            return False
        for v in row:
            if type(v) not in _PLAIN:  # bool, float, numpy... take the canonical path
                return False
    return True


def provenance_bytes(record: Mapping[str, Any]) -> bytes:
    """``canonical_dumps(record)``, faster for big worlds.

    The per-rank rows of ``run.topology.ranks`` (thousands in a big world) are written
    with :func:`json.dumps` when they are lists of ints, strings and ``None``, which gives
    the same bytes as :func:`~mushin_box._sidecars.canonical_dumps` without its
    per-value Python walk; anything else takes the canonical path.

    Examples
    --------
    >>> from mushin_box._topology import simulate_topology
    >>> rec = {"run": {"topology": simulate_topology(2, 2, seed_base=1).to_dict()}}
    >>> provenance_bytes(rec) == canonical_dumps(rec)
    True
    """
    run = record.get("run")
    topology = run.get("topology") if isinstance(run, Mapping) else None
    ranks = topology.get("ranks") if isinstance(topology, Mapping) else None
    if not (isinstance(run, Mapping) and isinstance(topology, Mapping) and _plain_rows(ranks)):
        return canonical_dumps(record)
    marker = f"mushin-ranks-{secrets.token_hex(16)}"
    stub = {**record, "run": {**run, "topology": {**topology, "ranks": marker}}}
    try:
        rows = json.dumps(
            ranks, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError):  # lone surrogates in a host name, ...
        return canonical_dumps(record)
    head, sep, tail = canonical_dumps(stub).partition(f'"{marker}"'.encode())
    if not sep:  # pragma: no cover - the marker is always there
        return canonical_dumps(record)
    return head + rows + tail


def write_provenance(cell_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> Path:
    """Write ``record`` atomically (canonical JSON) as the cell's ``mushin_provenance.json``.

    A config value that JSON cannot hold is replaced by a note rather than losing the
    whole record. Returns the path written.
    """
    from mushin_box._cells import PROVENANCE_FILE

    path = Path(cell_dir) / PROVENANCE_FILE
    try:
        data = provenance_bytes(record)
    except (TypeError, ValueError) as exc:
        fixed = {**record, "reproducibility": dict(record.get("reproducibility") or {})}
        fixed["reproducibility"]["config"] = f"<not JSON-serializable: {exc}>"
        data = provenance_bytes(fixed)
    write_bytes_atomic(path, data)
    return path
