# SPDX-License-Identifier: MIT
"""The task in the code fingerprint: a notebook's or the REPL's task (no file: hashed by its
source), a script's, a callable object; and the fingerprint's exact value, pinned (issue 19:
the fingerprint group's mutants of ``_task_text`` and ``code_identity``)."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import linecache
import sys
import textwrap
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mushin_box._sweep.usercode import code_identity, user_modules

_CELLS = itertools.count()

Cell = Callable[..., dict[str, Any]]


@pytest.fixture
def cell(monkeypatch: pytest.MonkeyPatch) -> Cell:
    """``cell(source, module=...)`` runs ``source`` as a notebook cell does: compiled under
    a new file name that only ``linecache`` holds (as IPython does for each cell it runs), in
    a module with no ``__file__`` (a kernel's ``__main__``). Returns the cell's namespace."""

    def run(source: str, module: str = "__mp_main__") -> dict[str, Any]:
        source = textwrap.dedent(source)
        filename = f"<cell-{next(_CELLS)}>"
        monkeypatch.setitem(
            linecache.cache, filename, (len(source), None, source.splitlines(True), filename)
        )
        main = types.ModuleType(module)  # no __file__
        monkeypatch.setitem(sys.modules, module, main)
        exec(compile(source, filename, "exec"), main.__dict__)
        return main.__dict__

    return run


TASK = """
def task(x):
    return {"y": x * 10}
"""


def test_a_notebook_task_is_hashed_by_its_source(cell: Cell) -> None:
    """No file holds a notebook's task: editing the cell re-runs the sweep, running the same
    cell again does not; it is one task in the kernel (``__main__``) and in a spawned worker
    (``__mp_main__``), and another task than a same-source one of another module."""
    first = code_identity(cell(TASK)["task"])
    assert code_identity(cell(TASK)["task"]) == first  # the cell run again, unchanged
    edited = code_identity(cell(TASK.replace("x * 10", "x * 100"))["task"])
    assert edited.fingerprint != first.fingerprint
    assert code_identity(cell(TASK, module="__main__")["task"]) == first
    assert code_identity(cell(TASK, module="nb_module")["task"]) != first
    assert first.modules == {}  # no file to hash


def test_a_repl_task_without_source_is_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The REPL keeps no source (before Python 3.13): the task counts by its name alone."""
    main = types.ModuleType("__mp_main__")
    monkeypatch.setitem(sys.modules, "__mp_main__", main)
    exec(compile(TASK + "\ndef other(x):\n    return x\n", "<stdin>", "exec"), main.__dict__)
    task = code_identity(main.__dict__["task"])
    assert task == code_identity(main.__dict__["task"])
    assert task.fingerprint != code_identity(main.__dict__["other"]).fingerprint


def test_a_script_run_as_main_is_covered_by_its_file(tmp_path: Path) -> None:
    """``python train.py`` runs the task as ``__main__.task`` from a file no finder on
    ``sys.path`` finds under that name: the file counts, named after it, and an edit of it
    re-runs."""
    script = tmp_path / f"train_{uuid.uuid4().hex[:8]}.py"
    script.write_text(TASK)
    spec = importlib.util.spec_from_file_location("__mp_main__", script)
    assert spec is not None and spec.loader is not None
    main = importlib.util.module_from_spec(spec)
    sys.modules["__mp_main__"] = main
    try:
        spec.loader.exec_module(main)
        assert user_modules([main.task]) == {script.stem: script.resolve()}
        before = code_identity(main.task)
        script.write_text(TASK.replace("x * 10", "x * 100"))
        assert code_identity(main.task).fingerprint != before.fingerprint
    finally:
        del sys.modules["__mp_main__"]


class _Train:
    def __call__(self, x: int) -> int:
        return x


class _Evaluate:
    def __call__(self, x: int) -> int:
        return x


def test_callable_objects_are_tasks_named_by_their_class() -> None:
    """An instance of a class with ``__call__`` has no ``__qualname__``: its class names it."""
    train = code_identity(_Train())
    assert train == code_identity(_Train())
    assert train.fingerprint != code_identity(_Evaluate()).fingerprint


# --- the pinned value ------------------------------------------------------------------

GOLDEN_PROJECT = {
    "golden_fp_project/__init__.py": "",
    "golden_fp_project/tasks.py": "from . import helpers\n\n\ndef task(x):\n    return x\n",
    "golden_fp_project/helpers.py": "SCALE = 10\n",
    "golden_fp_project/models.py": "class Net:\n    pass\n",
}
GOLDEN_CONFIG = {
    "lr": 0.1,
    "epochs": 3,
    "db": {"password": "hunter22"},
    "model": {"_target_": "golden_fp_project.models.Net"},
    "out": "${missing}",
}


def _golden_fingerprints(root: Path, cell: Cell) -> dict[str, Any]:
    from omegaconf import OmegaConf

    from mushin_box._sweep.cells import config_fingerprint

    for rel, text in GOLDEN_PROJECT.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        tasks = importlib.import_module("golden_fp_project.tasks")
        importlib.import_module("golden_fp_project.models")  # as builds(Net) would have
        file_task = code_identity(tasks.task, config=GOLDEN_CONFIG)
        return {
            "code: a task in a package, a config target": file_task.fingerprint,
            "code: its modules": dict(file_task.modules),
            "code: a notebook's task": code_identity(cell(TASK)["task"]).fingerprint,
            "config": config_fingerprint(OmegaConf.create(GOLDEN_CONFIG)),
        }
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.split(".")[0] == "golden_fp_project"]:
            del sys.modules[name]


@pytest.fixture
def no_golden_project() -> Iterator[None]:
    assert not any(m.split(".")[0] == "golden_fp_project" for m in sys.modules)
    yield


def test_the_fingerprints_of_a_fixed_project_are_pinned(
    tmp_path: Path, cell: Cell, golden: Callable[[str, str], None], no_golden_project: None
) -> None:
    """A change of how code or config is hashed changes every fingerprint at once, and every
    completed cell of every sweep runs again on resume: a change to make on purpose, never
    by accident. The value holds no path: the same project elsewhere has the same one."""
    here = _golden_fingerprints(tmp_path / "here", cell)
    assert _golden_fingerprints(tmp_path / "elsewhere" / "deeper", cell) == here
    golden("code-fingerprint.json", json.dumps(here, indent=2, sort_keys=True) + "\n")
