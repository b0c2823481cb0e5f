# SPDX-License-Identifier: MIT
"""Every runnable example in mushin-box's docstrings runs and prints what it says."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from conftest import DoctestFinder, run_doctests

import mushin_box

PACKAGE = Path(mushin_box.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# every module of the package, in every subpackage (found on disk: a module that fails to
# import fails its test instead of being left out); __main__ runs the CLI when imported
MODULES = sorted(
    name
    for name in map(_module_name, PACKAGE.rglob("*.py"))
    if name.rpartition(".")[2] != "__main__"
)


def test_every_module_is_collected() -> None:
    # 58 once the package was split into rooms (mushin_box, its 8 subpackages and their
    # modules, testing); fewer means modules went missing from the walk
    assert len(MODULES) >= 58, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = run_doctests(importlib.import_module(name))
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_public_classes_examples_are_collected() -> None:
    # HydraDDP's and Workflow's examples live in their rooms' modules
    for name in ("mushin_box._train.pl", "mushin_box._sweep.workflow"):
        module = importlib.import_module(name)
        found = {
            t.name.rsplit(".", 1)[-1] for t in DoctestFinder().find(module, name) if t.examples
        }
        assert {"HydraDDP", "Workflow"} & found, (name, found)
