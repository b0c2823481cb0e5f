# SPDX-License-Identifier: MIT
"""``mushin-box launch``: an experiment + ``--nodes``/``--gpus`` → a ``Workflow.run``.

The topology is said once (one rank per GPU): :func:`plan_launch` derives the SLURM launcher
config and the Trainer's ``devices``/``num_nodes`` from it. With ``local=True`` (the CLI's
choice where no SLURM cluster answers) the cells run here: ``gpus`` CPU ranks under HydraDDP.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import LOCK_FILE
from mushin_box._core.overrideparse import is_hydra_key, override_keys, parse_overrides
from mushin_box._core.overrides import format_override
from mushin_box._core.targets import public
from mushin_box._launch.schedule import (
    ScheduleError,
    slurm_launcher_config,
    split_launcher_overrides,
)
from mushin_box._slurm.config import SlurmSettings
from mushin_box._slurm.launcher import SubmititCellLauncher
from mushin_box._slurm.torchrun import check_torchrun_settings, torchrun_launcher_fields
from mushin_box._sweep.validate import SweepKeys, UnknownKeyError
from mushin_box._sweepdir.manifest import SweepBusyError, SweepLock
from mushin_box._train.configtask import fit_task

#: a local torchrun cell runs until it ends (submitit's local jobs have a time limit)
_TORCHRUN_TIMEOUT_MIN = 7 * 24 * 60


@public
class LaunchError(MushinBoxError, ValueError):
    """A launch that cannot work as asked; the message names the fix. ``override``: the
    override it refuses, when it refuses one."""

    def __init__(self, message: str, *, override: str | None = None) -> None:
        super().__init__(message)
        self.override = override


@attrs.frozen
class LaunchPlan:
    """Everything :func:`run_launch` passes to ``Workflow.run``; ``where``: why it runs
    where it does; ``sources``: where each launcher value came from (``--time``, ...)."""

    mode: str  # "slurm" or "local"
    nodes: int
    gpus: int
    launcher: str | None
    launcher_config: Mapping[str, Any] | None
    overrides: tuple[str, ...]
    working_dir: str | None
    pythonpath: str | None
    where: str = ""
    sources: Mapping[str, str] = attrs.field(factory=dict)
    torchrun: bool = False  # the ranks are torchrun workers (local: --standalone)
    min_nodes: int | None = None  # torchrun's elastic membership: --nnodes min_nodes:nodes

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["overrides"] = list(self.overrides)
        return data


def check_working_dir(working_dir: str | None) -> None:
    """Refuse, before anything is written, a sweep directory ``Workflow.run`` would fail
    on after writing (a file, ``${`` in its path, a lock another run holds)."""
    if working_dir is None:  # Workflow.run's default lies under the current directory
        here = Path.cwd()
        if "${" in str(here):
            raise LaunchError(
                f"the default sweep directory (under {here}) contains '${{', which Hydra "
                "resolves as an interpolation in the sweep's log paths: run from another "
                "directory, or pass a --working-dir without '${'"
            )
        return
    root = Path(working_dir).resolve()
    if "${" in str(root):
        raise LaunchError(
            f"--working-dir {root} contains '${{', which Hydra resolves as an interpolation "
            "in the sweep's log paths: choose a directory without '${'"
        )
    existing = next(p for p in (root, *root.parents) if p.exists())  # "/" always exists
    if not existing.is_dir():
        raise LaunchError(
            f"--working-dir {root}: {existing} is a file, not a directory; choose another "
            "--working-dir"
        )
    if (root / LOCK_FILE).is_file():
        try:
            with SweepLock(root):
                pass
        except SweepBusyError:
            raise LaunchError(
                f"another launch (or Workflow.run) is already using the sweep directory "
                f"{root}: wait for it to finish, or pass another --working-dir"
            ) from None


def config_of(target: Any) -> Any:
    """The config of a launch's target (a ``Workflow``'s, or the config itself)."""
    # lazy: _sweep.workflow loads Hydra, which importing LaunchError must not
    from mushin_box._sweep.workflow import Workflow

    return target.config if isinstance(target, Workflow) else target


def task_of(target: Any) -> Any:
    """The task a launch of ``target`` runs (a config-only experiment's: ``fit_task``)."""
    # lazy: _sweep.workflow loads Hydra, which importing LaunchError must not
    from mushin_box._sweep.workflow import Workflow

    return target.task if isinstance(target, Workflow) else fit_task


def select_key(config: Any, key: str) -> Any:
    """The value at dotted ``key`` of an experiment's config (None: absent or unreadable)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(OmegaConf.structured(config), key, default=None)
    except Exception:  # a config OmegaConf cannot read: no topology checks
        return None


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LaunchError(f"{name} must be a positive integer, got {value!r}")
    return value


def plan_launch(
    target: Any,
    *,
    nodes: int = 1,
    gpus: int = 1,
    overrides: Sequence[str] = (),
    local: bool,
    image: str | None = None,
    binds: Sequence[str] = (),
    image_python: str = "python",
    slurm: SlurmSettings | Mapping[str, Any] | None = None,
    working_dir: str | None = None,
    pythonpath: str | None = None,
    preflight: bool = True,
    where: str = "",
    torchrun: bool = False,
    max_restarts: int = 0,
    min_nodes: int | None = None,
) -> LaunchPlan:
    """How to run ``target`` on ``nodes`` x ``gpus`` ranks. The overrides may not set the
    topology; ``hydra.launcher.KEY=VALUE`` joins the launcher config; ``where``: why it runs
    where it does.

    >>> from hydra_zen import make_config
    >>> trainer = {"strategy": {"_target_": "mushin_box.HydraDDP"}}
    >>> plan = plan_launch(make_config(trainer=trainer, module={}), gpus=2, local=True)
    >>> plan.mode, plan.launcher, list(plan.overrides)
    ('local', None, ['++trainer.devices=2', '++trainer.num_nodes=1', "++trainer.accelerator='cpu'"])
    """
    nodes, gpus = _positive("--nodes", nodes), _positive("--gpus", gpus)
    elastic = min_nodes is not None and min_nodes != nodes
    if min_nodes is not None and not 1 <= _positive("--nodes MIN", min_nodes) <= nodes:
        raise LaunchError(f"--nodes {min_nodes}:{nodes}: MIN must not exceed MAX")
    if elastic and not torchrun:
        raise LaunchError(
            f"--nodes {min_nodes}:{nodes} is torchrun's elastic membership: add --torchrun, "
            f"or give one node count (--nodes {nodes})"
        )
    check_working_dir(working_dir)
    config = config_of(target)
    has_trainer = select_key(config, "trainer") is not None
    check_enumerable(overrides)
    given = override_keys(overrides)
    for key in ("trainer.devices", "trainer.num_nodes"):
        if key in given:
            raise LaunchError(
                f"override {key} conflicts with --nodes/--gpus, which set it: drop the override"
            )
    check_keys(target, overrides)
    try:
        task_overrides, launched = split_launcher_overrides(overrides)
    except ScheduleError as exc:
        raise LaunchError(str(exc)) from None
    out = list(task_overrides)

    def made(
        mode: str, launcher: str | None, config: Any, why: str, shown: Any, **kw: Any
    ) -> LaunchPlan:
        final = (mode, nodes, gpus, launcher, config, tuple(out), working_dir, pythonpath)
        return LaunchPlan(*final, why, shown, **kw)

    if has_trainer:
        out += [
            format_override("trainer.devices", gpus, force_add=True),
            format_override("trainer.num_nodes", nodes, force_add=True),
        ]
    elif nodes * gpus > 1:
        raise LaunchError(
            f"{nodes * gpus} ranks requested, but the experiment's config has no `trainer` "
            "node whose devices/num_nodes mushin-box could set: add one, or use --gpus 1"
        )
    if local:
        why = where or "--local"
        if nodes > 1:
            raise LaunchError(
                f"--nodes {nodes} needs SLURM ({why}): run on a cluster's login node, or use "
                "--nodes 1"
            )
        if launched.sources:
            raise LaunchError(
                f"hydra.launcher.{next(iter(launched.sources)).partition('.')[0]} configures "
                "the SLURM launcher, "
                f"but this launch runs here ({why}): drop the override"
            )
        if "trainer.accelerator" not in given and has_trainer:
            out.append(format_override("trainer.accelerator", "cpu", force_add=True))
        if torchrun:  # one `torchrun --standalone` agent per cell
            tr_config = {
                "torchrun": True,
                "nproc_per_node": gpus,
                "max_restarts": max_restarts,
                "timeout_min": _TORCHRUN_TIMEOUT_MIN,
                "poll_interval_s": 1.0,
            }
            try:  # the launcher's own check, before anything is written
                check_torchrun_settings({**tr_config, "tasks_per_node": 1})
            except ValueError as exc:
                raise LaunchError(str(exc)) from None
            return made("local", "mushin_local", tr_config, why, {}, torchrun=True)
        if gpus > 1 and select_key(config, "trainer.strategy._target_") != "mushin_box.HydraDDP":
            raise LaunchError(
                f"--gpus {gpus} here starts {gpus} CPU ranks with HydraDDP, but the trainer's "
                "strategy is not HydraDDP: set strategy=builds(mushin_box.HydraDDP), or "
                "use --gpus 1"
            )
        return made("local", None, None, why, {})

    if not isinstance(slurm, SlurmSettings):
        slurm = SlurmSettings(**(slurm or {}))
    _, settings = split_launcher_overrides(overrides, slurm)  # the overrides win
    container: dict[str, Any] = {}
    if image is not None:
        env = {"PYTHONPATH": pythonpath} if pythonpath else None
        container = dict(
            image=image, binds=list(binds), env=env, preflight=preflight, image_python=image_python
        )
        if working_dir is not None:
            container["working_dir"] = working_dir
    try:
        config_out = slurm_launcher_config(
            nodes=nodes, gpus=gpus, settings=settings, container=container
        )
    except ScheduleError as exc:
        raise LaunchError(str(exc)) from None
    if torchrun:
        try:
            config_out, out = slurm_torchrun(config_out, out, nodes, max_restarts, min_nodes)
        except (TypeError, ValueError) as exc:
            raise LaunchError(str(exc)) from None
    container_keys = ("image", "binds", "image_python")
    shown = {
        k: v
        for k, v in settings.sources.items()
        if k.split(".")[0] in config_out or (image is not None and k in container_keys)
    }
    kw = {"torchrun": torchrun, "min_nodes": min_nodes if elastic else None}
    return made("slurm", "mushin_slurm", config_out, where or "SLURM", shown, **kw)


def check_keys(target: Any, overrides: Sequence[str]) -> None:
    """Refuse a plain override whose key names nothing in the config, with the closest
    name, before Hydra says only "use +" (after :func:`check_enumerable` parsed them)."""
    keys = SweepKeys(task_of(target), config_of(target))
    for text, o in zip(overrides, parse_overrides(overrides), strict=True):
        key = o.key_or_group
        if o.is_add() or o.is_force_add() or o.is_delete() or is_hydra_key(key):
            continue
        try:
            keys.needs_add(key)
        except UnknownKeyError as exc:  # its hint is Workflow.run's; an override's is '+'
            raise LaunchError(
                f"override {text!r}: {exc.reason}; to add a new key on purpose, write "
                f"+{text.lstrip('+')}",
                override=text,
            ) from None


def hydra_error_line(exc: BaseException, overrides: Sequence[str] = (), config: Any = None) -> str:
    """Hydra's refusal on one line, with the reason its ``__cause__`` holds; for a plain
    override of a key the config lacks (found by the cause's type and ``full_key``, never
    its words), the fix: ``+``, or ``populate_full_signature=True`` for a left-out parameter.

    >>> error = ValueError("Error merging override x=abc")
    >>> error.__cause__ = TypeError("Value 'abc' could not be converted to Integer\\n"
    ...                             "    full_key: x")
    >>> hydra_error_line(error)
    "Error merging override x=abc: Value 'abc' could not be converted to Integer"
    """
    cause = exc.__cause__ or exc.__context__
    unknown = _override_of_unknown_key(cause, overrides)
    if unknown is not None:
        parts = [f"Could not override {unknown[0]!r}"]
    else:
        parts = [" ".join(str(exc).split()).rstrip(".")]
    if cause is not None:
        first = next((line.strip() for line in str(cause).splitlines() if line.strip()), "")
        if first and first not in parts[0]:
            parts.append(first.rstrip("."))
    text = ": ".join(parts)
    if unknown is not None:
        left_out = _left_out_parameter(config, unknown[0])
        text += f"; {left_out}, or" if left_out else "; to add it on purpose,"
        text += f" write +{unknown[1]}"
    return text


def _left_out_parameter(config: Any, key: str) -> str | None:
    """``'lr' is a parameter of MLP ...`` when ``key``'s node builds a target taking it."""
    node_key, _, name = key.rpartition(".")
    if config is None or not node_key:
        return None
    try:  # lazy: Hydra and OmegaConf load only once an override failed
        from hydra.utils import get_object
        from omegaconf import OmegaConf

        target = OmegaConf.select(OmegaConf.structured(config), f"{node_key}._target_")
        parameters = inspect.signature(get_object(target)).parameters
    except Exception:  # no target, not importable, no signature: Hydra's words stand
        return None
    if name not in parameters:
        return None
    short = str(target).rsplit(".", 1)[-1]
    return (
        f"{name!r} is a parameter of {short} that the config's builds({short}) left out: "
        f"write builds({short}, populate_full_signature=True) in the experiment"
    )


def _override_of_unknown_key(
    cause: BaseException | None, overrides: Sequence[str]
) -> tuple[str, str] | None:
    """``(key, text)`` of the first plain override setting (under) the key OmegaConf said
    the config lacks, or None."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    if not isinstance(cause, ConfigAttributeError | ConfigKeyError) or not cause.full_key:
        return None
    lacking = str(cause.full_key)
    for text, o in zip(overrides, parse_overrides(overrides), strict=True):  # a plan's: parsed
        key = o.key_or_group
        plain = not (o.is_add() or o.is_force_add() or o.is_delete())
        if plain and (key == lacking or key.startswith(lacking + ".")):
            return key, text
    return None


def check_enumerable(overrides: Sequence[str]) -> None:
    """Refuse an override Hydra cannot parse, and a sweep its basic sweeper cannot list
    (``interval()``): a launch runs every cell of a grid.

    >>> check_enumerable(["lr=0.1,1", "seed=range(3)"])
    >>> check_enumerable(["lr=interval(0.1,1)"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mushin_box.LaunchError: override 'lr=interval(0.1,1)': ... list the values...
    """
    from hydra.errors import OverrideParseException

    try:
        parsed = parse_overrides(overrides)
    except OverrideParseException as exc:
        raise LaunchError(exc.message) from None
    for text, o in zip(overrides, parsed, strict=True):
        if o.is_sweep_override() and not o.is_discrete_sweep():
            kind = o.value_type.name.lower().removesuffix("_sweep") if o.value_type else "range"
            raise LaunchError(
                f"override {text!r}: an {kind}() sweep is a continuous range that only a "
                "sampling sweeper (e.g. Optuna) draws from, and a launch runs every cell of a "
                f"grid: list the values instead ({o.key_or_group}=0.1,0.5,1) or use range()"
            )


def slurm_torchrun(
    config: Mapping[str, Any],
    overrides: Sequence[str],
    nodes: int,
    max_restarts: int,
    min_nodes: int | None,
) -> tuple[dict[str, Any], list[str]]:
    """The SLURM launcher config as one torchrun agent per node (checked: ValueError), and
    the overrides: under elastic membership the Trainer's ``num_nodes`` is the group
    torchrun formed (``GROUP_WORLD_SIZE``, else ``nodes``), so its world-size check holds.

    >>> config = {"nodes": 2, "tasks_per_node": 2, "gpus_per_node": 2}
    >>> fields, out = slurm_torchrun(config, ["++trainer.num_nodes=2"], 2, 0, 1)
    >>> fields["min_nodes"], out
    (1, ["++trainer.num_nodes='${oc.decode:${oc.env:GROUP_WORLD_SIZE,2}}'"])
    """
    fields = torchrun_launcher_fields(config, max_restarts=max_restarts, min_nodes=min_nodes)
    SubmititCellLauncher("slurm", fields)
    out = list(overrides)
    if "min_nodes" in fields:
        out = [o for o in out if not o.startswith("++trainer.num_nodes=")]
        out.append(f"++trainer.num_nodes='${{oc.decode:${{oc.env:GROUP_WORLD_SIZE,{nodes}}}}}'")
    return fields, out
