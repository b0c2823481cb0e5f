# SPDX-License-Identifier: MIT
"""The seam to Lightning's private API, for both of its namespaces.

Lightning ships its code twice (``pytorch_lightning``, ``lightning.pytorch``), and a strategy
works with its own namespace's Trainer only: every function takes the Trainer package
(:data:`NAMESPACES`' keys) and imports that namespace alone. No public API offers the launcher
hook (:func:`strategy_base`), ``_SubprocessScriptLauncher``, the one type whose ranks the
Trainer kills on Ctrl-C (:func:`launcher_base`), nor what the running loop logged
(``callback_metrics`` keeps earlier rounds': :func:`logged_names`).
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

#: a namespace's Trainer package -> its Fabric package
NAMESPACES: dict[str, str] = {
    "pytorch_lightning": "lightning_fabric",
    "lightning.pytorch": "lightning.fabric",
}


def namespace_of(module_class: type) -> str:
    """The namespace whose ``LightningModule`` ``module_class`` subclasses (of those loaded);
    ``pytorch_lightning`` when neither."""
    for namespace in NAMESPACES:
        loaded = sys.modules.get(namespace)
        base = getattr(loaded, "LightningModule", None)
        if isinstance(base, type) and issubclass(module_class, base):
            return namespace
    return "pytorch_lightning"


def _fabric(namespace: str) -> str:
    try:
        return NAMESPACES[namespace]
    except KeyError:
        raise ValueError(
            f"unknown Lightning namespace {namespace!r}; use one of {sorted(NAMESPACES)}"
        ) from None


@functools.cache
def strategy_base(namespace: str) -> type[Any]:
    """``DDPStrategy`` of ``namespace`` with its launcher hook under public names
    (``configure_launcher()``, ``set_launcher``, ``process_group_timeout_s``)."""
    _fabric(namespace)
    ddp = importlib.import_module(f"{namespace}.strategies").DDPStrategy

    class LauncherHookDDP(ddp):
        mushin_namespace = namespace

        def _configure_launcher(self) -> None:  # the Trainer's call
            self.configure_launcher()

        def configure_launcher(self) -> None:
            """Pick the launcher (Lightning's own choice here)."""
            super()._configure_launcher()

        def set_launcher(self, launcher: Any) -> None:
            self._launcher = launcher

        @property
        def process_group_timeout_s(self) -> float | None:
            timeout = self._timeout
            return None if timeout is None else timeout.total_seconds()

    LauncherHookDDP.__qualname__ = LauncherHookDDP.__name__
    return LauncherHookDDP


@functools.cache
def launcher_base(namespace: str) -> type[Any]:
    """``_SubprocessScriptLauncher`` of ``namespace``, plus ``set_num_threads()``: what the
    stock launcher sets before it calls the trainer."""
    distributed = importlib.import_module(f"{_fabric(namespace)}.utilities.distributed")
    stock = importlib.import_module(f"{namespace}.strategies.launchers")._SubprocessScriptLauncher

    class ScriptLauncher(stock):
        mushin_namespace = namespace

        def set_num_threads(self) -> None:
            distributed._set_num_threads_if_needed(num_processes=self.num_processes)

    ScriptLauncher.__qualname__ = ScriptLauncher.__name__
    return ScriptLauncher


def logged_names(trainer: Any) -> set[str] | None:
    """The metric names the trainer's running loop logged this round (``name``, and its
    ``name_step``/``name_epoch`` forms), or None when no loop runs."""
    results = getattr(trainer, "_results", None)
    if results is None:
        return None
    names = {getattr(getattr(m, "meta", None), "name", None) for m in results.values()}
    found = {n for n in names if n}
    return found | {f"{n}_{s}" for n in found for s in ("step", "epoch")}
