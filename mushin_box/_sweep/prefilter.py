# SPDX-License-Identifier: MIT
"""Resume that costs nothing: completed cells are decided before Hydra launches anything.

Design note: a completed cell is not sent through Hydra's launch (a job directory, three
``.hydra/*.yaml`` files, logging, the runner) only for the runner to return its metrics.
The driver takes the same steps as the runner, for every job of the grid,
in this process: the job's config is the one the launcher will compose (the same
overrides, re-serialized by Hydra's basic sweeper; built from the first job's config and
the job's swept values, :mod:`mushin_box._sweep.jobconfig`, and checked against Hydra's
full compose of the grid's last job), the cell's directory is resolved as ``run_job``
resolves it, the config fingerprint is the runner's own
:func:`~mushin_box._sweep.cells.config_fingerprint` (computed from plain data where no key
can depend on a swept one), and the pure
:func:`~mushin_box._sweep.decide.decide` is asked with the same facts. Only a clean reuse
(no warning, nothing recorded, metrics and provenance readable) is taken out of the launch;
a cell whose status, metrics and provenance files are the very ones the sweep's index read
(:mod:`~mushin_box._sweepdir.settled`: same inode, size, mtime and ctime) is asked the
same question with the record and metrics the index holds, instead of its files read again;
every other cell (changed config or code, a corrupt sidecar, failed, cancelled, skipped,
reused despite stale code) still goes through the launcher and decides for itself. When in doubt (a
config whose value depends on the job, e.g. ``${hydra:...}`` or
a custom resolver; an image the driver cannot see; the user's own sweeper), nothing is
taken out. The jobs left run through :class:`CellSweeper`, Hydra's basic sweeper minus the
reused jobs (``hydra_plugins.mushin_box_launcher.cells_sweeper``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import METRICS_FILE, PROVENANCE_FILE
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._core.sidecars import SidecarWarning, read_json
from mushin_box._sweep.cells import CellPlan, config_fingerprint
from mushin_box._sweep.compose import first_job
from mushin_box._sweep.decide import decide
from mushin_box._sweep.jobconfig import PlainFingerprints, SweptValues, element_overrides, strings
from mushin_box._sweep.jobconfig import cell_of as _cell_of
from mushin_box._sweepdir.settled import whole_provenance
from mushin_box._upstream.hydra import sweep_jobs

__all__ = [
    "SWEEPER_TARGET",
    "Prefiltered",
    "prefilter",
    "task_part",
]

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
    """A job's own overrides, without Hydra's: what the sweeper's ``split_arguments`` sees
    (Hydra hands the sweeper the task overrides only).

    Examples
    --------
    >>> task_part(["hydra.sweep.dir=/s", "x=1", "hydra/launcher=basic", "+y=2"])
    ('x=1', '+y=2')
    """
    return tuple(
        text
        for text in job
        if not (text.lstrip("+~") == "hydra" or text.lstrip("+~").startswith(("hydra.", "hydra/")))
    )


def _jobs(overrides: Sequence[str]) -> list[list[str]] | None:
    """Every job's overrides, as Hydra's basic sweeper builds them; None if it can't tell."""

    try:
        return sweep_jobs(parse_overrides(overrides))
    except Exception:  # a glob over a group, a sampled sweep: the sweeper decides
        return None


def own_sweeper(overrides: Sequence[str]) -> bool:
    """Does the launch use mushin-box's sweeper (:data:`SWEEPER_TARGET`)? Unless the user
    chose a sweeper.

    Examples
    --------
    >>> own_sweeper(["x=1,2"]), own_sweeper(["hydra/sweeper=optuna"])
    (True, False)
    """
    return not any(o.lstrip("+~").startswith(("hydra/sweeper", "hydra.sweeper")) for o in overrides)


def _driver_sees_all(
    overrides: Sequence[str], launcher: str | None, launcher_config: Mapping[str, Any] | None
) -> bool:
    """Can the driver compute a cell's fingerprints as its job will? Not with the user's own
    sweeper, nor with an image the launcher runs the ranks in (its digest is theirs)."""
    if not own_sweeper(overrides):
        return False
    if launcher in (None, "basic"):
        return True
    return not any("image" in str(k) and v for k, v in (launcher_config or {}).items())


def _stored(config: Any, launcher: str | None) -> Any:
    """The config as ``hydra_zen.launch`` stores it (a DictConfig for pickling launchers)."""

    from omegaconf import OmegaConf

    if launcher not in (None, "basic") and is_dataclass(config):
        return OmegaConf.create(OmegaConf.to_container(OmegaConf.structured(config)))
    return config


def _depends_on_job(task_cfg: Any) -> bool:
    """Does the config hold a resolver whose value may differ inside the job?

    Examples
    --------
    >>> from omegaconf import OmegaConf
    >>> _depends_on_job(OmegaConf.create({"a": "${oc.env:HOME}", "b": ["${x}"]}))
    False
    >>> _depends_on_job(OmegaConf.create({"a": {"b": ["${now:%H}"]}}))
    True
    """
    from omegaconf import OmegaConf

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
    """The cell's metrics if the runner would reuse it (``previous``: its status record)
    without a word and without writing anything, else None (``said``: gets what the runner
    will say of it, e.g. that its code changed). ``indexed``: the metrics of
    the cells whose files the sweep's index vouches for, unchanged since it read them
    (status, metrics and a whole provenance record: :mod:`~mushin_box._sweepdir.settled`),
    by directory name; the others' are read here. Call it with :class:`SidecarWarning`
    silenced: the runner says it, if the cell runs."""
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
    the sweep's secrets exported and Hydra's state kept (``sweeprun.launch_cells`` does).
    ``first``: the config of :func:`~mushin_box._sweep.compose.first_job`, composed from
    ``config`` and ``overrides`` (``check_composes``); used when it is the grid's first job,
    instead of composing that again. ``records``: the cells' status records
    (:func:`~mushin_box._sweepdir.manifest.cell_records`, read under the sweep's lock);
    ``indexed``: the metrics the sweep's index vouches for, by directory name (read under
    the lock too; see :func:`_reusable`)."""
    if not plan.resume or not _driver_sees_all(overrides, launcher, launcher_config):
        return Prefiltered()
    parsed = parse_overrides(overrides)
    jobs = _jobs(overrides)
    if not jobs:
        return Prefiltered()
    from hydra import initialize
    from hydra.core.config_store import ConfigStore

    statuses = dict(records)
    image = os.environ.get("MUSHIN_SIF_SHA256")
    name = f"mushin_prefilter_{uuid.uuid4().hex}"
    stored = _stored(config, launcher)
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
                fingerprints = {"config": fingerprint, "code": plan.code_fingerprint}
                if image:
                    fingerprints["image"] = image
                found = _reusable(directory, previous, fingerprints, plan, indexed or {}, said)
                if found is not None:
                    reused.add(task_part(job))
                    metrics[directory] = found
    except Exception:  # Hydra refuses a job: the launch says it, as before
        return Prefiltered(len(jobs))
    finally:
        ConfigStore.instance().repo.pop(f"{name}.yaml", None)
    if launcher not in (None, "basic"):  # its jobs run elsewhere: their warnings reach
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
    """Each job's directory, and how to get its config fingerprint (None: it may differ in
    the job, which decides). From the first job's config (``first``, or composed) and the
    swept values, as plain data (:class:`PlainFingerprints`) or as a config
    (:class:`SweptValues`), each only when the last job composed in full by Hydra agrees
    with it (as the launch trusts :class:`~mushin_box._sweep.jobconfig.JobConfigs`); else
    from each job composed in full, as the launcher composes it."""
    from hydra import compose

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
    """A job's config fingerprint from the first job's: as plain data if it can (its config
    holds no interpolation that could depend on the job), else from its config."""
    found = plain.fingerprint(job) if plain is not None else None
    return found if found is not None else _job_config_print(fast.cell(job)[1])
