# SPDX-License-Identifier: MIT
"""Saved configs name stable targets: ``mushin_box.X``."""

from __future__ import annotations

import pytest
from hydra_zen import builds

import mushin_box

PUBLIC = sorted(set(mushin_box.__all__) - {"__version__", "multirun", "hydra_list"})


@pytest.mark.parametrize("name", PUBLIC)
def test_public_names_are_targeted_as_mushin_box(name: str) -> None:
    obj = getattr(mushin_box, name)
    assert obj.__module__ == "mushin_box"
    if isinstance(obj, type) and name not in {"ApptainerNotFound"}:
        assert builds(obj, populate_full_signature=False)._target_ == f"mushin_box.{name}"


def test_private_paths_do_not_resolve() -> None:
    with pytest.raises(ModuleNotFoundError):
        __import__("mushin_box._ddp")
