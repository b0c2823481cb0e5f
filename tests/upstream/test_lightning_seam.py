# SPDX-License-Identifier: MIT
"""The Lightning seam (``mushin_box/_upstream/lightning.py``): each private name the kit uses,
in each namespace, does what the kit relies on. A failure names the upstream name that
changed (``test_lightning_<name>_...``) and the namespace (the test id)."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from mushin_box._upstream.lightning import (
    NAMESPACES,
    launcher_base,
    logged_names,
    namespace_of,
    strategy_base,
)

pytestmark = pytest.mark.parametrize("namespace", sorted(NAMESPACES))


def _environment(namespace: str) -> Any:
    fabric = importlib.import_module(f"{NAMESPACES[namespace]}.plugins.environments")
    return fabric.LightningEnvironment()


def _trainer(namespace: str, **kwargs: Any) -> Any:
    trainers = importlib.import_module(namespace)
    quiet = {"enable_progress_bar": False, "enable_model_summary": False, "logger": False}
    return trainers.Trainer(accelerator="cpu", devices=1, **quiet, **kwargs)


def _tiny(namespace: str) -> tuple[Any, Any]:
    door = "mushin_box.testing" if namespace == "pytorch_lightning" else "mushin_box.lightning"
    kit = importlib.import_module(door)
    return kit.TinyModule(), kit.TinyDataModule()


def test_lightning_Strategy_configure_launcher_is_called_by_the_Trainer(namespace: str) -> None:
    calls: list[str] = []

    class Recording(strategy_base(namespace)):
        def configure_launcher(self) -> None:
            calls.append("configure")
            super().configure_launcher()  # Lightning's own choice

    strategy = Recording()
    _trainer(namespace, strategy=strategy)
    assert calls == ["configure"]
    assert strategy.launcher is not None, "Lightning's DDPStrategy picked no launcher"


def test_lightning_Strategy_launcher_is_what_set_launcher_stored(namespace: str) -> None:
    strategy = strategy_base(namespace)()
    marker = object()
    strategy.set_launcher(marker)
    assert strategy.launcher is marker


def test_lightning_DDPStrategy_timeout_is_the_process_group_timeout(namespace: str) -> None:
    assert strategy_base(namespace)(timeout=timedelta(seconds=7)).process_group_timeout_s == 7.0
    assert strategy_base(namespace)().process_group_timeout_s == 1800.0  # torch's default


def test_lightning_SubprocessScriptLauncher_kill_signals_its_procs(namespace: str) -> None:
    # the Trainer kills a launcher's ranks this way on Ctrl-C (for this launcher type only)
    launcher = launcher_base(namespace)(_environment(namespace), 2, 1)
    assert (launcher.num_processes, launcher.num_nodes, launcher.procs) == (2, 1, [])
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    launcher.procs = [proc]
    try:
        launcher.kill(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()


def test_lightning_SubprocessScriptLauncher_launch_of_one_process_starts_none_and_sets_LOCAL_RANK(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HydraDDP's one-process launcher runs a call through it, then undoes the variables
    for name in ("LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    launcher = launcher_base(namespace)(_environment(namespace), 1, 1)
    assert launcher.launch(lambda x: x + 1, 41) == 42
    assert launcher.procs == []
    assert (os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"]) == ("0", "1")


def test_lightning_set_num_threads_if_needed_sets_OMP_NUM_THREADS_once(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    threads = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    launcher = launcher_base(namespace)(_environment(namespace), 2, 1)
    try:
        launcher.set_num_threads()
        assert os.environ["OMP_NUM_THREADS"] == str(torch.get_num_threads())
        assert torch.get_num_threads() == max(1, (os.cpu_count() or 1) // 2)
        monkeypatch.setenv("OMP_NUM_THREADS", "3")  # set by the user: left alone
        launcher.set_num_threads()
        assert os.environ["OMP_NUM_THREADS"] == "3"
    finally:
        torch.set_num_threads(threads)


def test_lightning_Trainer_results_names_what_the_running_loop_logged(
    namespace: str, tmp_path: Any
) -> None:
    # MetricsCallback records a round's own metrics, not callback_metrics' earlier values
    callbacks = importlib.import_module(namespace).Callback
    seen: dict[str, set[str] | None] = {}

    class Spy(callbacks):
        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if not trainer.sanity_checking:
                seen["validation"] = logged_names(trainer)

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            seen["train"] = logged_names(trainer)

    module, data = _tiny(namespace)
    trainer = _trainer(
        namespace,
        max_epochs=1,
        callbacks=[Spy()],
        enable_checkpointing=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, datamodule=data)
    assert seen["validation"] is not None and seen["train"] is not None
    assert "val_loss" in seen["validation"] and "train_loss" not in seen["validation"]
    assert "train_loss" in seen["train"] and "val_loss" not in seen["train"]
    assert logged_names(trainer) is None  # no loop runs after the fit
    assert namespace_of(type(module)) == namespace
