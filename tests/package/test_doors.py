# SPDX-License-Identifier: MIT
"""One door per thing: a private module's ``__all__`` lists only what it defines.

The public faces (``mushin_box`` and ``mushin_box.testing``) re-export; a room's module
never does, so each name has one import path inside the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mushin_box"
FACES = {PACKAGE / "__init__.py", PACKAGE / "lightning.py", PACKAGE / "testing.py"}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p not in FACES)


def _defined_and_exported(path: Path) -> tuple[set[str], list[str]]:
    defined: set[str] = set()
    exported: list[str] = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                defined.add(target.id)
                if target.id == "__all__":
                    exported = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[union-attr]
    return defined, exported


def test_the_package_has_rooms_with_modules() -> None:
    assert len(MODULES) >= 50


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_exports_only_what_it_defines(path: Path) -> None:
    defined, exported = _defined_and_exported(path)
    assert [name for name in exported if name not in defined] == []
