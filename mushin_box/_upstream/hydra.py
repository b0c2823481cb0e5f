# SPDX-License-Identifier: MIT
"""Hydra's private names, each behind one function or class: the only module that reaches
``hydra._internal`` or a leading-underscore name of Hydra. Why no public API does each:

Hydra sets overrides over a config only inside a full compose (:func:`apply_overrides`),
ships its basic plugins only under ``_internal`` (:func:`basic_sweeper`), has no hook for
writing ``.hydra/*.yaml`` (:func:`replace_save_config`), creates a ``GlobalHydra`` when asked
(:func:`global_hydra_kept`), and its ``return_value`` raises (:func:`job_return_value`).
Its plugin scan makes new classes: a class of theirs is looked up when asked for, never kept
(a subclass of a stale one fails in Hydra's ``super()`` call). Tests: ``tests/upstream/``.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper


def apply_overrides(overrides: Sequence[Any], cfg: Any) -> None:
    """Set Hydra's parsed ``overrides`` over ``cfg`` in place, as a compose does (typed
    nodes validate, ``ConfigCompositionException`` for what Hydra refuses)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(list(overrides), cfg)  # pyright: ignore[reportPrivateUsage]


def overrides_dirname(
    overrides: Sequence[Any], exclude_keys: Sequence[str], item_sep: str, kv_sep: str
) -> str:
    """``hydra.job.override_dirname`` of a job's parsed task ``overrides``, as Hydra writes it."""
    from hydra._internal.config_loader_impl import get_overrides_dirname

    return get_overrides_dirname(list(overrides), list(exclude_keys), item_sep, kv_sep)


def basic_sweeper() -> type[BasicSweeper]:
    """Hydra's basic sweeper, to subclass, as Hydra's plugin scan left it: Hydra calls its
    ``split_arguments``, then ``validate_batch_is_legal`` before each batch; ``setup`` keeps
    ``launcher``, ``hydra_context`` and ``config`` on the instance."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    return BasicSweeper


def sweep_jobs(overrides: Sequence[Any]) -> list[list[str]]:
    """Every job's overrides, in the order Hydra's basic sweeper runs them."""
    return basic_sweeper().split_arguments(list(overrides), None)[0]


def batches(jobs: list[list[str]], size: int) -> list[list[list[str]]]:
    """``jobs`` cut into the basic sweeper's batches of at most ``size`` jobs."""
    return list(basic_sweeper().split_overrides_to_chunks(jobs, size))


def runs_jobs_in_process(launcher: Any) -> TypeGuard[BasicLauncher]:
    """Is ``launcher`` exactly Hydra's basic launcher, which runs each job in this process?"""
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    return type(launcher) is BasicLauncher


def replace_save_config(writer: Callable[[Any, str, Any], None]) -> bool:
    """Make ``writer(cfg, filename, output_dir)`` Hydra's writer of a job's ``.hydra`` files;
    False, nothing replaced, when Hydra's writer is not of that signature."""
    import hydra.core.utils as hydra_utils

    current = getattr(hydra_utils, "_save_config", None)
    if current is writer:
        return True
    expected = ["cfg", "filename", "output_dir"]
    if current is None or list(inspect.signature(current).parameters) != expected:
        return False
    hydra_utils._save_config = writer  # type: ignore[attr-defined]  # noqa: SLF001
    return True


@contextmanager
def global_hydra_kept() -> Iterator[None]:
    """Put Hydra's ``GlobalHydra`` back as it was (a copy, or none) however the block ends."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton

    kept: Any = copy.copy(Singleton._instances.get(GlobalHydra))  # pyright: ignore[reportPrivateUsage]
    try:
        yield
    finally:
        if kept is None:
            Singleton._instances.pop(GlobalHydra, None)  # pyright: ignore[reportPrivateUsage]
        else:
            GlobalHydra.set_instance(kept)


def job_return_value(ret: Any) -> Any:
    """A ``JobReturn``'s task value, or its failed job's exception, not raised."""
    return ret._return_value  # pyright: ignore[reportPrivateUsage]
