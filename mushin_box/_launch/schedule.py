# SPDX-License-Identifier: MIT
"""The ``mushin_slurm`` launcher config of a launch, checked value by value with its source.

Values come from flags, the profile and defaults (:mod:`mushin_box._launch.options`), and
from ``hydra.launcher.KEY=VALUE`` overrides. An override used to reach Hydra as is: it
skipped :func:`~mushin_box.submitit_slurm_config`'s checks and was missing from the plan.
Now it is taken out of the overrides and goes through the same checks as the flags, wins
over them (it is the most specific thing the user wrote), and shows in the plan with its
source. Each value is checked alone first, so that an error names where the value came
from (``--partition: ...``, ``profile gpu (pyproject.toml): ...``, ``override
hydra.launcher.qos=...: ...``), then all together (memory options that exclude each other),
then by the launcher itself (its own fields: ``requeue_on``, ``max_requeues``, ...).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from mushin_box._slurm.config import SLURM_LAUNCHER_KEYS, submitit_slurm_config

__all__ = [
    "LAUNCHER_ONLY_KEYS",
    "ScheduleError",
    "slurm_launcher_config",
    "split_launcher_overrides",
]

#: ``mushin_slurm`` fields that ``submitit_slurm_config`` does not take (the launcher's own)
LAUNCHER_ONLY_KEYS = (
    *("requeue_on", "max_requeues", "rank_signal", "poll_interval_s", "max_wait_s"),
    "max_array_tasks",
)
_TOPOLOGY = {"nodes": "--nodes", "gpus_per_node": "--gpus", "tasks_per_node": "--gpus"}
_IMAGE_FIELDS = {"python": "--image", "srun_args": "--image", "setup": None}


class ScheduleError(ValueError):
    """A scheduler value that cannot work; the message names its source and the fix."""


def split_launcher_overrides(
    overrides: Sequence[str],
) -> tuple[list[str], dict[str, Any], dict[str, str]]:
    """``(other overrides, hydra.launcher values, their sources)``.

    Raises
    ------
    ScheduleError
        ``hydra/launcher=...`` (launch chooses it), a sweep over a launcher key (the
        launcher is one for the whole sweep), a deleted key, the topology (``--nodes``
        and ``--gpus`` say it), or an unknown key (with the closest).

    Examples
    --------
    >>> split_launcher_overrides(["lr=0.1", "hydra.launcher.qos=high",
    ...                           "hydra.launcher.additional_parameters.mail-type=END"])
    (['lr=0.1'], {'qos': 'high', 'additional_parameters': {'mail-type': 'END'}}, \
{'qos': 'override hydra.launcher.qos=high', 'additional_parameters.mail-type': \
'override hydra.launcher.additional_parameters.mail-type=END'})
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    rest: list[str] = []
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    for text, o in zip(overrides, parsed, strict=True):
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
        source = f"override {text}"
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
        accepted = (*SLURM_LAUNCHER_KEYS, *LAUNCHER_ONLY_KEYS)
        if head in _IMAGE_FIELDS and head != "setup":
            raise ScheduleError(
                f"override {text!r}: {head} is written by --image (the rank container); "
                "use --image, --bind and --image-python"
            )
        if head not in accepted or (sub and head != "additional_parameters"):
            close = difflib.get_close_matches(head, accepted, n=1)
            hint = f"did you mean hydra.launcher.{close[0]}? " if close else ""
            raise ScheduleError(
                f"override {text!r}: mushin_slurm has no field {name!r}; {hint}fields: "
                f"{', '.join(sorted(accepted))}"
            )
        if sub:  # one sbatch option: merged into additional_parameters
            values.setdefault("additional_parameters", {})[sub] = o.value()
            sources[f"additional_parameters.{sub}"] = source
        elif head == "additional_parameters" and isinstance(parsed_value := o.value(), dict):
            value: dict[str, Any] = {str(k): v for k, v in parsed_value.items()}  # pyright: ignore[reportUnknownVariableType]
            values.setdefault("additional_parameters", {}).update(value)
            for option in value:
                sources[f"additional_parameters.{option}"] = source
        else:
            values[head] = o.value()
            sources[head] = source
    return rest, values, sources


def _source_of(key: str, sources: Mapping[str, str], value: Any) -> str:
    if key == "additional_parameters" and isinstance(value, dict):
        named = {sources.get(f"additional_parameters.{k}", "") for k in value}
        return " / ".join(sorted(s for s in named if s)) or "additional_parameters"
    return sources.get(key, key)


def slurm_launcher_config(
    *,
    nodes: int,
    gpus: int,
    settings: Mapping[str, Any],
    sources: Mapping[str, str],
    container: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The checked launcher config: ``submitit_slurm_config(nodes, gpus, **settings,
    **container)`` plus the launcher's own fields, then the launcher's checks.

    Raises
    ------
    ScheduleError
        The first value that cannot work, named by its source (``sources[key]``).
    """
    mine = {k: v for k, v in settings.items() if k in LAUNCHER_ONLY_KEYS}
    theirs = {k: v for k, v in settings.items() if k not in LAUNCHER_ONLY_KEYS}
    alone: list[tuple[str, dict[str, Any], Any]] = []
    for key, value in theirs.items():
        if key == "additional_parameters" and isinstance(value, Mapping):
            for option, v in value.items():  # pyright: ignore[reportUnknownVariableType]
                alone.append((key, {key: {option: v}}, {option: v}))  # its own source
        else:
            alone.append((key, {key: value}, value))
    for key, kwargs, value in alone:  # alone first: the error names the value's source
        try:
            submitit_slurm_config(nodes=nodes, gpus_per_node=gpus, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"{_source_of(key, sources, value)}: {exc}") from None
    try:
        config = submitit_slurm_config(
            nodes=nodes, gpus_per_node=gpus, **theirs, **dict(container or {})
        )
    except (TypeError, ValueError) as exc:
        raise ScheduleError(str(exc)) from None
    config.update(mine)
    from mushin_box._slurm.launcher import SubmititCellLauncher

    for key, value in mine.items():
        try:
            SubmititCellLauncher("slurm", {key: value})
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"{sources.get(key, key)}: {exc}") from None
    try:
        SubmititCellLauncher("slurm", config)
    except (TypeError, ValueError) as exc:
        raise ScheduleError(str(exc)) from None
    return config
