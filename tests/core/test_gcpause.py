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

READERS: list[Callable[[Path], Any]] = [load_experiment, read_sweep, read_settled]


@pytest.fixture
def collector() -> Any:
    was = gc.isenabled()
    yield gc
    gc.enable() if was else gc.disable()


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
def test_a_bulk_read_leaves_the_collector_as_it_found_it(
    tmp_path: Path, collector: Any, reader: Callable[[Path], Any]
) -> None:
    root = tmp_path / "sweep"
    lr_sweep(root)
    collector.enable()
    assert reader(root) is not None and gc.isenabled()
    collector.disable()
    assert reader(root) is not None and not gc.isenabled()  # the caller's pause is kept


def test_an_error_in_the_block_turns_the_collector_back_on(collector: Any) -> None:
    collector.enable()
    with pytest.raises(RuntimeError), gc_paused():
        assert not gc.isenabled()
        raise RuntimeError("a read failed")
    assert gc.isenabled()
