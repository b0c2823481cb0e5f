# SPDX-License-Identifier: MIT
"""The ``mushin_slurm`` launcher config of a launch, checked value by value with its source.

``hydra.launcher.KEY=VALUE`` overrides win over :mod:`.options`' values. Each value is
checked alone first, so that an error names its source, then all together, then by the
launcher itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._core.targets import public
from mushin_box._slurm.config import SETTING_FIELDS, SlurmSettings, submitit_slurm_config
from mushin_box._slurm.launcher import SubmititCellLauncher

_TOPOLOGY = {"nodes": "--nodes", "gpus_per_node": "--gpus", "tasks_per_node": "--gpus"}
_FIELDS = tuple(f.name for f in SETTING_FIELDS)


@public
class ScheduleError(MushinBoxError, ValueError):
    """A scheduler value that cannot work; the message names its source and the fix."""


def split_launcher_overrides(
    overrides: Sequence[str], settings: SlurmSettings | None = None
) -> tuple[list[str], SlurmSettings]:
    """``(other overrides, settings with the hydra.launcher values over them)``; a
    :class:`ScheduleError` for ``hydra/launcher=``, a swept, deleted or unknown launcher
    key, or the topology (``--nodes``/``--gpus`` say it).

    >>> rest, s = split_launcher_overrides(["lr=0.1", "hydra.launcher.qos=high",
    ...                                     "hydra.launcher.additional_parameters.mail-type=END"])
    >>> rest, s.given()
    (['lr=0.1'], {'qos': 'high', 'additional_parameters': {'mail-type': 'END'}})
    >>> s.sources["additional_parameters.mail-type"]
    'override hydra.launcher.additional_parameters.mail-type=END'
    """
    rest: list[str] = []
    settings = SlurmSettings() if settings is None else settings
    for text, o in zip(overrides, parse_overrides(overrides), strict=True):
        key = o.key_or_group
        if key in ("hydra/launcher", "hydra.launcher"):
            raise ScheduleError(
                f"override {text!r}: launch chooses the launcher (mushin_slurm on SLURM); set "
                "its fields as hydra.launcher.KEY=VALUE, or drop the override"
            )
        if not key.startswith("hydra.launcher."):
            rest.append(text)
            continue
        name = key.removeprefix("hydra.launcher.")
        if o.is_sweep_override():
            raise ScheduleError(
                f"override {text!r}: one launcher runs the whole sweep, so its {name} cannot "
                "be swept; give one value (or launch once per value)"
            )
        if o.is_delete():
            raise ScheduleError(f"override {text!r}: a launcher key cannot be deleted; drop it")
        head, _, sub = name.partition(".")
        if head in _TOPOLOGY:
            raise ScheduleError(
                f"override {text!r}: {_TOPOLOGY[head]} sets {head} (one task per GPU); use it"
            )
        if head in ("python", "srun_args"):
            raise ScheduleError(
                f"override {text!r}: {head} is written by --image (the rank container); "
                "use --image, --bind and --image-python"
            )
        accepted = (*_TOPOLOGY, *_FIELDS)
        if head not in accepted or (sub and head != "additional_parameters"):
            close = difflib.get_close_matches(head, accepted, n=1)
            hint = f"did you mean hydra.launcher.{close[0]}? " if close else ""
            raise ScheduleError(
                f"override {text!r}: mushin_slurm has no field {name!r}; {hint}fields: "
                f"{', '.join(sorted(accepted))}"
            )
        value = {sub: o.value()} if sub else o.value()
        if head == "additional_parameters" and isinstance(value, dict):
            value = {str(k): v for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        settings = settings.merged({head: value}, f"override {text}")
    return rest, settings


def slurm_launcher_config(
    *, nodes: int, gpus: int, settings: SlurmSettings, container: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``submitit_slurm_config(nodes, gpus, **settings, **container)`` plus the launcher's
    own fields, checked (:class:`ScheduleError`: the first bad value, named by its source)."""
    alone: list[tuple[str, dict[str, Any]]] = []  # alone first: the error names the source
    for key, value in settings.given(launcher=False).items():
        if key == "additional_parameters" and isinstance(value, Mapping):
            for option, v in value.items():  # pyright: ignore[reportUnknownVariableType]
                source = settings.sources.get(f"{key}.{option}", key)
                alone.append((source, {key: {option: v}}))
        else:
            alone.append((settings.source(key), {key: value}))
    for source, kwargs in alone:
        try:
            submitit_slurm_config(nodes=nodes, gpus_per_node=gpus, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"{source}: {exc}") from None
    try:
        config: dict[str, Any] = {
            **submitit_slurm_config(
                nodes=nodes,
                gpus_per_node=gpus,
                **settings.given(launcher=False),
                **dict(container or {}),
            )
        }
    except (TypeError, ValueError) as exc:
        raise ScheduleError(str(exc)) from None
    mine = settings.given(launcher=True)
    config.update(mine)
    for key, value in mine.items():
        try:
            SubmititCellLauncher("slurm", {key: value})
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"{settings.source(key)}: {exc}") from None
    try:
        SubmititCellLauncher("slurm", config)
    except (TypeError, ValueError) as exc:
        raise ScheduleError(str(exc)) from None
    return config
