# SPDX-License-Identifier: MIT
"""One door per thing: inside the package, a name is imported from the module that defines it.

The public faces (``mushin_box``, ``mushin_box.lightning`` and ``mushin_box.testing``)
re-export; a room's module never passes on a name it imported itself, so each name has one
import path inside the package, and a private module's interface is its names without a
leading underscore.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mushin_box"
FACES = {PACKAGE / "__init__.py", PACKAGE / "lightning.py", PACKAGE / "testing.py"}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p not in FACES)


def _path_of(module: str) -> Path:
    parts = module.split(".")[1:]
    path = PACKAGE.joinpath(*parts)
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _defined(path: Path) -> set[str]:
    """The names a module binds at its top level other than by importing them."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            names.update(e.id for e in elements if isinstance(e, ast.Name))
    return names


def _imports_from_rooms(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mushin_box."):
            pairs += [(node.module or "", alias.name) for alias in node.names]
    return pairs


def test_the_package_has_rooms_with_modules() -> None:
    assert len(MODULES) >= 50


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_imports_each_name_from_where_it_is_defined(path: Path) -> None:
    passed_on = [
        f"{module}.{name}"
        for module, name in _imports_from_rooms(path)
        if _path_of(module) not in FACES
        and _path_of(module).is_file()
        and name not in _defined(_path_of(module))
        and not _path_of(f"{module}.{name}").exists()
    ]
    assert passed_on == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_private_module_lists_no_interface_beside_its_names(path: Path) -> None:
    assert "__all__" not in _defined(path)
