# SPDX-License-Identifier: MIT
"""Every room says what it holds: its charter names each of its modules, and it stays one
concept (under ~4,000 lines; docs/architecture.md), each module one concept (~800 lines)."""

from __future__ import annotations

import ast
import re

import pytest
from conftest import REPO

PACKAGE = REPO / "mushin_box"
ROOMS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def test_the_rooms_are_the_ones_check_imports_knows() -> None:
    text = (REPO / "scripts" / "check-imports").read_text()
    block = text[text.index("ROOMS: dict[str, int] = {") : text.index("}", text.index("ROOMS:"))]
    assert sorted(re.findall(r'"(\w+)": \d+', block)) == ROOMS


@pytest.mark.parametrize("room", ROOMS)
def test_a_rooms_charter_names_each_of_its_modules(room: str) -> None:
    charter = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text())) or ""
    modules = sorted(p.stem for p in (PACKAGE / room).glob("*.py") if p.stem != "__init__")
    if room == "cli":  # one module per command: the commands are listed in main.COMMANDS
        modules = ["main", "tables"]
    named = set(re.findall(r":mod:`\.(\w+)`", charter))
    assert [m for m in modules if m not in named] == [], f"{room}/__init__.py does not name them"
    assert "Must not" in charter  # and what the room must not do


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_stays_under_4000_lines(room: str) -> None:
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / room).glob("*.py"))
    assert lines <= 4000, f"{room} holds {lines} lines: does it still hold one concept?"


def test_a_module_holds_one_concept_in_at_most_800_lines() -> None:
    modules = [p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts]
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in modules
        if (n := len(p.read_text().splitlines())) > 800
    }
    assert long == {}, "a module this long probably holds two concepts: split it by concept"
