# SPDX-License-Identifier: MIT
"""Compose a sweep's first job as Hydra will, before anything is written to disk.

Hydra finds a bad override or launcher setting only when it composes a job, after the sweep
directory and its manifest exist; composed here first, a refusal writes nothing, and the
user gets Hydra's own exception, with a note.

Examples
--------
>>> from hydra_zen import make_config
>>> check_composes(make_config(lr=0.1), ["lr=0.1,0.2"]).lr
0.1
>>> check_composes(make_config(lr=0.1), ["lrr=0.1"])
Traceback (most recent call last):
...
hydra.errors.ConfigCompositionException: Could not override 'lrr'...
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.overrideparse import parse_overrides
from mushin_box._core.targets import public
from mushin_box._train.resume import RESUME_PARAM
from mushin_box._upstream.hydra import global_hydra_kept


def first_job(overrides: Sequence[str]) -> list[str]:
    """The overrides of the sweep's first job: each sweep replaced by its first value.

    >>> first_job(["lr=0.1,0.2", "+x=range(1,3)", "hydra/launcher=basic", "s='a,b'"])
    ['lr=0.1', '+x=1', 'hydra/launcher=basic', "s='a,b'"]
    """
    from hydra.core.override_parser.types import Transformer

    out = []
    for text, parsed in zip(overrides, parse_overrides(overrides), strict=True):
        if not parsed.is_sweep_override():
            out.append(text)
            continue
        try:
            value = next(iter(parsed.sweep_iterator(transformer=Transformer.encode)))
        except (TypeError, StopIteration):  # interval(): not iterable, start from its start
            value = str(getattr(parsed.value(), "start", ""))
        out.append(f"{parsed.get_key_element()}={value}")
    return out


def check_composes(config: Any, overrides: Sequence[str]) -> Any:
    """Compose the sweep's first job (:func:`first_job`), ``hydra`` included (the resume
    shortcut starts from it); Hydra's own error, with a note, if it refuses it."""
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore

    name = f"mushin_check_{uuid.uuid4().hex}"
    ConfigStore.instance().store(name=name, node=config)
    try:
        with initialize(version_base="1.3", config_path=None):
            return compose(name, overrides=first_job(overrides), return_hydra_config=True)
    except Exception as exc:
        exc.add_note("mushin-box: Hydra refused the sweep; nothing was written")
        raise
    finally:
        ConfigStore.instance().repo.pop(f"{name}.yaml", None)


@public
class MissingValueError(MushinBoxError, ValueError):
    """A value the task needs is given nowhere (or ``???``): every cell would fail on it."""


def check_required(task: Any, composed: Any) -> None:
    """Refuse, before anything is launched, a sweep whose first job lacks a value: a ``???``
    left in the composed config, or a task parameter without a default that the config does
    not hold (Hydra and zen find both only inside each cell).

    >>> from omegaconf import OmegaConf
    >>> def task(lr: float, epochs: int = 1): ...
    >>> check_required(task, OmegaConf.create({"lr": 0.1}))
    >>> check_required(task, OmegaConf.create({"epochs": 2}))
    Traceback (most recent call last):
        ...
    mushin_box.MissingValueError: lr is required by the task ...
    """

    from omegaconf import OmegaConf

    body = OmegaConf.masked_copy(composed, [k for k in composed if k != "hydra"])
    missing = sorted(_missing_keys(body, ""))
    if missing:
        raise MissingValueError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} '???' (required) "
            f"and given nowhere: set it in the config, or pass {missing[0]}=VALUE (an "
            "override, or a keyword of Workflow.run)"
        )
    target = inspect.unwrap(getattr(task, "func", task))
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: zen says what it lacks
        return
    needed = [
        p.name
        for p in params
        if p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in body
        and p.name != RESUME_PARAM  # given by the kit to every cell
    ]
    if needed:
        raise MissingValueError(
            f"{', '.join(needed)} {'is' if len(needed) == 1 else 'are'} required by the task "
            f"and given nowhere: add {'it' if len(needed) == 1 else 'them'} to the config, "
            f"or pass {needed[0]}=VALUE (an override, or a keyword of Workflow.run)"
        )


def _missing_keys(node: Any, prefix: str) -> Iterator[str]:
    """Dotted paths of the ``???`` values under ``node``, resolving nothing (the first job's
    interpolations resolve only inside the job)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    keys: Iterable[Any] = node.keys() if isinstance(node, DictConfig) else range(len(node))
    key: Any
    for key in keys:
        path = f"{prefix}{key}" if isinstance(node, DictConfig) else f"{prefix[:-1]}[{key}]"
        if OmegaConf.is_missing(node, key):
            yield path
        elif not OmegaConf.is_interpolation(node, key):
            child = node[key]  # a mapping or a list: the node itself, unresolved
            if isinstance(child, DictConfig | ListConfig):
                yield from _missing_keys(child, f"{path}.")


@contextmanager
def hydra_state_kept() -> Iterator[None]:
    """Put Hydra's process-wide state (``HydraConfig``, ``GlobalHydra``) back as it was: a
    launcher running jobs in this process (joblib) may leave ``HydraConfig`` set to the
    sweep's config, with no ``output_dir``, and every later ``job_dir()`` would raise.

    >>> from hydra.core.hydra_config import HydraConfig
    >>> from omegaconf import OmegaConf
    >>> with hydra_state_kept():
    ...     HydraConfig.instance().cfg = OmegaConf.create({"hydra": {}})
    >>> HydraConfig.initialized()
    False
    """
    from hydra.core.hydra_config import HydraConfig

    config = HydraConfig.instance().cfg
    try:
        with global_hydra_kept():
            yield
    finally:
        HydraConfig.instance().cfg = config
