# SPDX-License-Identifier: MIT
"""Resume that costs nothing: completed cells are decided before Hydra launches anything.

The driver takes the runner's steps for every job, in this process: the job's config
(:mod:`mushin_box._sweep.jobconfig`, checked against Hydra's full compose of the last job),
its directory, :func:`~mushin_box._sweep.cells.config_fingerprint` and the pure
:func:`~mushin_box._sweep.decide.decide` (from the index's record and metrics where the
sweep's index vouches for the cell). Only a clean reuse (no warning, nothing recorded,
metrics and provenance readable) is taken out of the launch; when in doubt (a value that
depends on the job, an image the driver cannot see, the user's own sweeper) every cell goes
through the launcher (:data:`SWEEPER_TARGET`) and decides for itself.
"""

from __future__ import annotations

import contextlib
import functools
import re
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import attrs
from hydra import compose, initialize
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE
from mushin_box._core.overrideparse import is_hydra_key, parse_overrides
from mushin_box._core.sidecars import SidecarWarning, read_json
from mushin_box._sweep.cells import CellPlan, cell_fingerprints, config_fingerprint
from mushin_box._sweep.compose import first_job
from mushin_box._sweep.decide import decide
from mushin_box._sweep.jobconfig import PlainFingerprints, SweptValues, element_overrides, strings
from mushin_box._sweep.jobconfig import cell_of as _cell_of
from mushin_box._sweepdir.settled import whole_provenance
from mushin_box._upstream.hydra import sweep_jobs

#: the Hydra sweeper that launches every job but the reused ones
SWEEPER_TARGET = "hydra_plugins.mushin_box_launcher.cells_sweeper.CellSweeper"

#: resolvers whose value is the same in the driver as in the job (secrets use oc.env)
_SAME_IN_DRIVER = frozenset(
    {"oc.env", "oc.decode", "oc.create", "oc.select", "oc.dict.keys", "oc.dict.values"}
)
_RESOLVER = re.compile(r"\$\{\s*([A-Za-z_][\w.]*)\s*:")


@attrs.frozen
class Prefiltered:
    """The grid's jobs (override lists, as the basic sweeper builds them), those reused
    (their task overrides), and the reused cells' metrics as read here, by directory."""

    jobs: int = 0
    reused: frozenset[tuple[str, ...]] = frozenset()
    metrics: Mapping[Path, dict[str, Any]] = attrs.field(factory=dict)

    @property
    def nothing_to_launch(self) -> bool:
        return self.jobs > 0 and len(self.reused) == self.jobs


def task_part(job: Sequence[str]) -> tuple[str, ...]:
    """A job's overrides without Hydra's, as the sweeper's ``split_arguments`` sees them.

    >>> task_part(["hydra.sweep.dir=/s", "x=1", "hydra/launcher=basic", "+y=2"])
    ('x=1', '+y=2')
    """
    return tuple(
        text
        for text in job
        if not is_hydra_key(text.lstrip("+~").split("=", 1)[0].split("@", 1)[0])
    )


def own_sweeper(overrides: Sequence[str]) -> bool:
    """Does the launch use mushin-box's sweeper (the user chose none)?

    >>> own_sweeper(["x=1,2"]), own_sweeper(["hydra/sweeper=optuna"])
    (True, False)
    """
    return not any(o.lstrip("+~").startswith(("hydra/sweeper", "hydra.sweeper")) for o in overrides)


def _depends_on_job(task_cfg: Any) -> bool:
    """Does the config hold a resolver whose value may differ inside the job?

    >>> from omegaconf import OmegaConf
    >>> _depends_on_job(OmegaConf.create({"a": "${oc.env:HOME}", "b": ["${x}"]}))
    False
    >>> _depends_on_job(OmegaConf.create({"a": {"b": ["${now:%H}"]}}))
    True
    """
    plain = OmegaConf.to_container(task_cfg, resolve=False, enum_to_str=True)
    return any(
        name not in _SAME_IN_DRIVER
        for text in strings(plain)
        if "${" in text
        for name in _RESOLVER.findall(text)
    )


def _reusable(
    directory: Path,
    previous: Mapping[str, Any],
    fingerprints: Mapping[str, str],
    plan: CellPlan,
    indexed: Mapping[str, dict[str, Any]],
    said: list[str],
) -> dict[str, Any] | None:
    """The cell's metrics if the runner would reuse it without a word and without writing
    anything, else None; ``said`` gets what the runner will say of it."""
    if previous.get("status") != "completed":
        return None
    decision = decide(
        previous,
        fingerprints,
        cell=directory.name,
        run_id=plan.run_id,
        resume=True,
        reuse_stale_code=plan.reuse_stale_code,
        code_modules=plan.code_modules,
    )
    said.extend(decision.warnings)
    if decision.action != "reuse" or decision.reused_despite or decision.warnings:
        return None
    if directory.name in indexed:  # `previous` is the indexed record, from the same file
        return indexed[directory.name]
    if not whole_provenance(read_json(directory / PROVENANCE_FILE)):
        return None
    metrics = read_json(directory / METRICS_FILE)
    return metrics if isinstance(metrics, dict) else None


#: the most of the runner's warnings a launch whose jobs run elsewhere repeats in the driver
_SAID_HERE = 5


def prefilter(
    config: Any,
    overrides: Sequence[str],
    plan: CellPlan,
    *,
    launcher: str | None,
    launcher_config: Mapping[str, Any] | None,
    records: Sequence[tuple[Path, Mapping[str, Any]]],
    indexed: Mapping[str, dict[str, Any]] | None = None,
    first: Any = None,
) -> Prefiltered:
    """The jobs of the grid that resume reuses as they are (see module doc); call it with
    the sweep's secrets exported and Hydra's state kept. ``first``: the composed config of
    :func:`~mushin_box._sweep.compose.first_job`, used when it is the grid's first job."""
    elsewhere = launcher not in (None, "basic")
    # the driver computes a cell's fingerprints as its job will, but not with the user's own
    # sweeper, nor with an image the launcher runs the ranks in (its digest is theirs)
    image = any("image" in str(k) and v for k, v in (launcher_config or {}).items())
    if not plan.resume or not own_sweeper(overrides) or (elsewhere and image):
        return Prefiltered()
    parsed = parse_overrides(overrides)
    try:  # every job's overrides, as Hydra's basic sweeper builds them
        jobs = sweep_jobs(parsed)
    except Exception:  # a glob over a group, a sampled sweep: the sweeper decides
        return Prefiltered()
    if not jobs:
        return Prefiltered()
    statuses = dict(records)
    name = f"mushin_prefilter_{uuid.uuid4().hex}"
    stored = config  # as hydra_zen.launch stores it: a DictConfig for pickling launchers
    if elsewhere and is_dataclass(config):
        stored = OmegaConf.create(OmegaConf.to_container(OmegaConf.structured(config)))
    if stored is not config or first_job(overrides) != list(jobs[0]):
        first = None  # composed from another config, or another first job
    ConfigStore.instance().store(name=name, node=stored)
    reused: set[tuple[str, ...]] = set()
    metrics: dict[Path, dict[str, Any]] = {}
    said: list[str] = []
    try:
        # a corrupt sidecar: the runner says it, when the cell runs
        with initialize(version_base="1.3", config_path=None), warnings.catch_warnings():
            warnings.simplefilter("ignore", SidecarWarning)
            cells = _cells(name, parsed, jobs, first)
            for job, (directory, config_print) in zip(jobs, cells, strict=True):
                previous = statuses.get(directory)
                if previous is None:  # never run, or no readable status: the runner decides
                    continue
                fingerprint = config_print()
                if fingerprint is None:
                    return Prefiltered(len(jobs))  # every job decides for itself
                fingerprints = cell_fingerprints(fingerprint, plan)
                found = _reusable(directory, previous, fingerprints, plan, indexed or {}, said)
                if found is not None:
                    reused.add(task_part(job))
                    metrics[directory] = found
    except Exception:  # Hydra refuses a job: the launch says it, as before
        return Prefiltered(len(jobs))
    finally:
        ConfigStore.instance().repo.pop(f"{name}.yaml", None)
    if elsewhere:  # its jobs run elsewhere: their warnings reach
        for message in said[:_SAID_HERE]:  # only their logs, so say them here too
            warnings.warn(message, stacklevel=2)
        if len(said) > _SAID_HERE:
            more = f"... and {len(said) - _SAID_HERE} more such (the jobs' logs say each)"
            warnings.warn(more, stacklevel=2)
    return Prefiltered(len(jobs), frozenset(reused), metrics)


def _job_config_print(task_cfg: Any) -> str | None:
    """The fingerprint of a job's task config; None if its value may differ in the job."""
    return None if _depends_on_job(task_cfg) else config_fingerprint(task_cfg)


def _cells(
    name: str, parsed: Sequence[Any], jobs: Sequence[Sequence[str]], first: Any = None
) -> Iterator[tuple[Path, Callable[[], str | None]]]:
    """Each job's directory, and how to get its config fingerprint (None: the job decides):
    from the first job's config and the swept values when the last job composed in full
    agrees, else from each job composed in full."""

    def composed(job: Sequence[str]) -> tuple[Path, Any]:
        return _cell_of(compose(name, overrides=list(job), return_hydra_config=True))

    if first is None:
        first = compose(name, overrides=list(jobs[0]), return_hydra_config=True)
    fast: SweptValues | None = None
    plain: PlainFingerprints | None = None
    with contextlib.suppress(Exception):  # not a grid of plain values: composed job by job
        fast = SweptValues(first, jobs, element_overrides(parsed))
        plain = PlainFingerprints(fast, jobs)
    if fast is not None and len(jobs) > 1:  # the last job: it differs in every swept value
        directory, full = composed(jobs[-1])
        quick = fast.cell(jobs[-1])
        if quick[0] != directory or config_fingerprint(quick[1]) != config_fingerprint(full):
            fast = plain = None
        elif plain is not None and plain.fingerprint(jobs[-1]) != config_fingerprint(full):
            plain = None
    for job in jobs:
        if fast is None:
            directory, task_cfg = composed(job)
            yield directory, functools.partial(_job_config_print, task_cfg)
        else:
            yield fast.directory(job), functools.partial(_fast_print, fast, plain, job)


def _fast_print(
    fast: SweptValues, plain: PlainFingerprints | None, job: Sequence[str]
) -> str | None:
    """A job's config fingerprint: as plain data if it can, else from its config."""
    found = plain.fingerprint(job) if plain is not None else None
    return found if found is not None else _job_config_print(fast.cell(job)[1])
