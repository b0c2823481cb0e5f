# SPDX-License-Identifier: MIT
"""The bulk readers pause the garbage collector while they read, and leave it as the
caller had it: on, off, or after an error (a user's process never finds it switched off)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sweep_files import lr_sweep

from mushin_box import load_experiment
from mushin_box._core.gcpause import gc_paused
from mushin_box._sweepdir.board import read_sweep
from mushin_box._sweepdir.settled import read_settled

pytestmark = pytest.mark.floor  # the floor job's subset (scripts/floor)

#: each reader, and a function it calls once a cell: the collector is looked at there
READERS: list[tuple[Callable[[Path], Any], str, str]] = [
    (load_experiment, "mushin_box._results.experiment", "job_series"),
    (read_sweep, "mushin_box._sweepdir.manifest", "read_status"),
    (read_settled, "mushin_box._sweepdir.settled", "read_status"),
]


@pytest.fixture
def collector() -> Any:
    was = gc.isenabled()
    yield gc
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("reader, module, name", READERS, ids=lambda r: getattr(r, "__name__", ""))
def test_a_bulk_read_pauses_the_collector_and_leaves_it_as_it_found_it(
    tmp_path: Path,
    collector: Any,
    monkeypatch: pytest.MonkeyPatch,
    reader: Any,
    module: str,
    name: str,
) -> None:
    import importlib

    root = tmp_path / "sweep"
    lr_sweep(root)
    seen: list[bool] = []
    real = getattr(importlib.import_module(module), name)

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(importlib.import_module(module), name, spy)
    collector.enable()
    assert reader(root) is not None and gc.isenabled()
    assert seen and not any(seen)  # paused while it read the cells
    collector.disable()
    assert reader(root) is not None and not gc.isenabled()  # the caller's pause is kept


def test_an_error_in_the_block_turns_the_collector_back_on(collector: Any) -> None:
    collector.enable()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a read failed")
    assert gc.isenabled()
