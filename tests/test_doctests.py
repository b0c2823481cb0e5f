# SPDX-License-Identifier: MIT
"""Every runnable example in mushin-box's docstrings runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import mushin_box

# __main__ runs the CLI when imported
MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(mushin_box.__path__, "mushin_box.")
    if m.name != "mushin_box.__main__"
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
