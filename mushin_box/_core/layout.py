# SPDX-License-Identifier: MIT
"""The disk and rank-environment contract: every file name and every ``MUSHIN_*`` variable.

Readers find a run by these names long after its writer is gone, and a rank learns what the
submit host decided through these variables: each is spelled here, once (a sweep directory:
docs/results-layout.md).

>>> from mushin_box._core import layout
>>> layout.stage_metrics_file("fit")
'fit_metrics.pt'
>>> sorted(layout.IMAGE_IDENTITY_ENV)
['base_digest', 'definition_sha256', 'sif_sha256', 'sif_uuid']
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path

# ---------------------------------------------------------------------------- a sweep

#: the sweep's manifest: one row per cell (a cache of the cells' status files)
MANIFEST_FILE = "mushin_sweep.json"
#: the driver's cache of its finished cells' sidecars: a resume reads one file, not three a cell
CELL_INDEX_FILE = ".mushin_cells.json"
#: held (flock) by the driver running the sweep: a second ``run()`` is refused
LOCK_FILE = ".mushin_sweep.lock"
#: a cell failed under ``on_error="raise"``; cells not yet started skip
ABORT_FILE = ".mushin_abort.json"
#: the jobs (SLURM ids, local pids) the launcher submitted, written at submission
JOBS_FILE = "mushin_jobs.json"
#: the latest ``mushin-box launch`` of the sweep: what ``mushin-box resume DIR`` replays
LAUNCH_FILE = "mushin_launch.json"

# ---------------------------------------------------------------------------- a cell

#: every ``status`` a cell may hold; ``cancelled`` (by ``cancel`` or a signal) runs again
CELL_STATES = ("pending", "running", "completed", "failed", "timeout", "skipped", "cancelled")
#: the states of a cell that is done for this run (nothing of it runs any more)
DONE_CELL_STATES = ("completed", "failed", "timeout", "skipped", "cancelled")

STATUS_FILE = "mushin_status.json"
METRICS_FILE = "mushin_metrics.json"
#: rank 0's hashes of a fit's weights and first batches, by epoch: where two runs part
FINGERPRINTS_FILE = "fit_fingerprints.json"
PROVENANCE_FILE = "mushin_provenance.json"
#: the installed package list, ``name==version`` per line, beside the provenance record
PACKAGES_FILE = "mushin_packages.txt"
ERROR_FILE = "mushin_error.txt"
#: a job's private directory: seed records, the attempt counter, stale checkpoints
JOB_PRIVATE_DIR = ".mushin"
SEEDS_DIR = "seeds"
#: under the job's private dir: ``rank<r>.json``, where each rank of an attempt ran
RANKS_DIR = "ranks"
ATTEMPT_FILE = "attempt.json"
STALE_CHECKPOINTS_DIR = "stale-checkpoints"
#: under the sweep's private dir: the uncommitted code of dirty launches, by its hash
CODE_PATCH_DIR = "code"
#: under a re-run's sweep: the git worktree holding the code ``reproduce --worktree`` ran
WORKTREE_DIR = f"{JOB_PRIVATE_DIR}/worktree"
#: under a cell: the output of each rank a local HydraDDP job starts (not rank 0's)
RANK_LOG_DIR = "logs"


def code_patch_file(sha256: str) -> str:
    """Where, relative to the sweep, a dirty launch keeps its uncommitted code, named by the
    sha256 the cells record (``reproducibility.code.git.diff_sha256``).

    >>> code_patch_file("ab" * 32)[:20]
    '.mushin/code/abababa'
    """
    return f"{JOB_PRIVATE_DIR}/{CODE_PATCH_DIR}/{sha256}.patch"


def rank_log_file(rank: int) -> str:
    """A local rank's output file under :data:`RANK_LOG_DIR`: ``rank1.log``."""
    return f"rank{int(rank)}.log"


#: under the job's private dir: the metrics of the attempt before a continuing one
EARLIER_METRICS_FILE = "earlier-metrics.json"

#: Hydra's own files in a job directory and a sweep directory (a plain ``--multirun``'s)
HYDRA_OUTPUT_SUBDIR = ".hydra"
HYDRA_CONFIG_FILE = "config.yaml"
HYDRA_OVERRIDES_FILE = "overrides.yaml"
HYDRA_MULTIRUN_FILE = "multirun.yaml"


#: MetricsCallback's default file name, after the stage: ``fit_metrics.pt``
STAGE_METRICS_SUFFIX = "metrics.pt"


def stage_metrics_file(stage: str, filename: str = STAGE_METRICS_SUFFIX) -> str:
    """MetricsCallback's file for a trainer stage (``fit``, ``validate``, ``test``)."""
    return f"{stage}_{filename}"


def stage_metrics_json_file(stage: str, filename: str = STAGE_METRICS_SUFFIX) -> str:
    """:func:`stage_metrics_file`'s canonical-JSON twin (``fit_metrics.json``): no torch."""
    return stage_metrics_file(stage, filename).removesuffix(".pt") + ".json"


# ---------------------------------------------------------------------------- read limits

_MIB = 1 << 20
#: the most bytes read of each kind of sidecar (a larger one is refused as a corrupt one),
#: far above what a run writes: a status is ~300 bytes, a 1,000-cell manifest ~300 KB
READ_LIMITS: Mapping[str, int] = {
    STATUS_FILE: 4 * _MIB,
    METRICS_FILE: 64 * _MIB,
    PROVENANCE_FILE: 64 * _MIB,
    FINGERPRINTS_FILE: 64 * _MIB,
    MANIFEST_FILE: 256 * _MIB,
    CELL_INDEX_FILE: 256 * _MIB,
    JOBS_FILE: 64 * _MIB,
    ABORT_FILE: 4 * _MIB,
    ATTEMPT_FILE: 4 * _MIB,
    EARLIER_METRICS_FILE: 64 * _MIB,
}
#: the sidecars that hold a JSON object: anything else in one is read as corrupt
OBJECT_SIDECARS = frozenset(
    {STATUS_FILE, METRICS_FILE, PROVENANCE_FILE, MANIFEST_FILE, JOBS_FILE, EARLIER_METRICS_FILE}
)
#: any other sidecar, and a MetricsCallback series (``*_metrics.json``, ``*_metrics.pt``)
_DEFAULT_READ_LIMIT = 16 * _MIB
_SERIES_READ_LIMIT = 512 * _MIB
#: ``report`` and ``show`` embed the end of a cell's traceback (:data:`ERROR_FILE`)
ERROR_TAIL_BYTES = 64 * 1024
#: ``logs`` prints at most the last this-many bytes of each rank's file (and says so)
LOG_READ_BYTES = 64 * _MIB


def read_limit(name: str) -> int:
    """The most bytes a reader reads of a sidecar named ``name`` (see :data:`READ_LIMITS`).

    >>> read_limit(STATUS_FILE), read_limit("fit_metrics.json") // _MIB
    (4194304, 512)
    """
    if name in READ_LIMITS:
        return READ_LIMITS[name]
    if name.endswith((STAGE_METRICS_SUFFIX, stage_metrics_json_file("", STAGE_METRICS_SUFFIX))):
        return _SERIES_READ_LIMIT
    return _DEFAULT_READ_LIMIT


#: under the sweep's working directory: the content-addressed rank env files
ENV_FILE_DIR = ".mushin-box"

# ---------------------------------------------------------------------------- a project

#: the project's settings: ``[tool.mushin-box]`` (secret-names, launch profiles)
PROJECT_FILE = "pyproject.toml"
#: launch profiles beside it, for a project without a pyproject.toml: ``[profiles.NAME]``
PROFILES_FILE = "mushin-box.toml"

# ---------------------------------------------------------------------------- rank env

#: the job's directory, for code that runs outside Hydra's job (HydraDDP's other ranks)
JOB_DIR_ENV = "MUSHIN_JOB_DIR"
#: a rank's global rank, set by HydraDDP for the ranks it starts
GLOBAL_RANK_ENV = "MUSHIN_GLOBAL_RANK"
#: ``TinyModule`` (tests, smoke runs): the global rank that raises at its second batch
TEST_FAIL_RANK_ENV = "MUSHIN_TEST_FAIL_RANK"
#: ``TinyModule``: a directory where each rank writes who and where it is
TEST_RANK_LOG_ENV = "MUSHIN_TEST_RANK_LOG"
#: the SLURM job name of ``mushin-box smoke``'s simulated one-node job
SMOKE_JOB_NAME = "mushin-smoke"
#: the seed base every rank adds its global rank to
SEED_BASE_ENV = "MUSHIN_SEED_BASE"
#: "1" when dataloader workers are seeded too
SEED_WORKERS_ENV = "MUSHIN_SEED_WORKERS"
#: HydraDDP: the JSON spec a child rank rebuilds its job from, and rank 0's pid
DDP_SPEC_ENV = "MUSHIN_DDP_SPEC"
DDP_PARENT_PID_ENV = "MUSHIN_DDP_PARENT_PID"
#: the rendezvous port, chosen per SLURM job by the batch script
MASTER_PORT_ENV = "MUSHIN_MASTER_PORT"
#: a SLURM job's nodes, comma-separated, as the batch script's ``scontrol`` expands them
JOB_NODES_ENV = "MUSHIN_JOB_NODES"
#: a torchrun cell's rendezvous (``nodes``: by group rank) -> the variable it travels in
RDZV_ENV: Mapping[str, str] = {
    "backend": "MUSHIN_RDZV_BACKEND",
    "endpoint": "MUSHIN_RDZV_ENDPOINT",
    "id": "MUSHIN_RDZV_ID",
    "nodes": "MUSHIN_RDZV_NODES",
}
#: "1" in a process whose cell failed: a torchrun worker then exits 1 (torchrun restarts)
CELL_FAILED_ENV = "MUSHIN_CELL_FAILED"
#: a torchrun worker's agent (its parent): the owner of the cell, whom ``cancel`` signals
TORCHRUN_AGENT_ENV = "MUSHIN_TORCHRUN_AGENT_PID"
#: where a torchrun agent notes how each failed worker ended, one ``<pid>.json`` each
TORCHRUN_EXITS_ENV = "MUSHIN_TORCHRUN_EXITS"
#: the image digests computed, by file identity, under ``$XDG_CACHE_HOME/mushin-box/``
DIGEST_CACHE_FILE = "image-digests.json"
#: the run id the rank wrapper writes into the env file
RUN_ID_ENV = "MUSHIN_RUN_ID"
#: a secret config value travels as ``${oc.env:MUSHIN_SECRET_<hash of its path>}``
SECRET_ENV_PREFIX = "MUSHIN_SECRET_"
#: the names a driver declared secret, a JSON list: every process of the launch applies
#: them, whatever pyproject.toml its working directory has
SECRET_NAMES_ENV = "MUSHIN_EXTRA_SECRET_NAMES"
#: the image identity (``reproducibility.image``) -> the env-file variable carrying it
IMAGE_IDENTITY_ENV: Mapping[str, str] = {
    "sif_sha256": "MUSHIN_SIF_SHA256",
    "sif_uuid": "MUSHIN_SIF_UUID",
    "definition_sha256": "MUSHIN_IMAGE_DEFINITION_SHA256",
    "base_digest": "MUSHIN_IMAGE_BASE_DIGEST",
}
#: the image's recipe (``run.image``: what it can be rebuilt from) -> its env-file variable
IMAGE_RECIPE_ENV: Mapping[str, str] = {
    "backend": "MUSHIN_IMAGE_BACKEND",
    "spec": "MUSHIN_IMAGE_SPEC",
    "context_commit": "MUSHIN_IMAGE_CONTEXT_COMMIT",
    "context_dir": "MUSHIN_IMAGE_CONTEXT_DIR",
    "recipe_sha256": "MUSHIN_IMAGE_RECIPE_SHA256",
}
#: what Apptainer (Singularity before it) sets inside a container: a rank ran in an image
RUNTIME_ENV: Mapping[str, tuple[str, ...]] = {
    "container": ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"),
    "container_name": ("APPTAINER_NAME", "SINGULARITY_NAME"),
}
#: the container launch (``run.container``) -> its env-file variable, the file's own last
CONTAINER_ENV: Mapping[str, str] = {
    "apptainer_version": "MUSHIN_APPTAINER_VERSION",
    "rank_command": "MUSHIN_RANK_COMMAND",
    "env_file": "MUSHIN_ENV_FILE",
}


def default_sweep_dir(suffix: str = "") -> Path:
    """Where a sweep goes when no directory is given, as Hydra's own multirun default:
    ``multirun/<local time><suffix>`` (``reproduce``'s suffix: ``-reproduce``).

    >>> path = default_sweep_dir("-reproduce")
    >>> path.parent.name, path.name.endswith("-reproduce"), len(path.name)
    ('multirun', True, 29)
    """
    return Path("multirun") / (_dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S") + suffix)
