# SPDX-License-Identifier: MIT
"""Stable config targets: a public name is recorded as ``mushin_box.X``, and only so.

hydra-zen writes ``_target_: <module>.<name>`` into every saved config and record, so each
public name declares itself part of ``mushin_box`` (:func:`public`): a move of the private
modules changes no record (and no private path is kept resolvable: none was recorded).

>>> import mushin_box
>>> mushin_box.HydraDDP.__module__
'mushin_box'
"""

from __future__ import annotations

from typing import TypeVar

#: names that ``mushin_box`` resolves without listing them in ``__all__``: not API, but
#: stable (recorded by name and pickled) -> the module that defines each
STABLE: dict[str, str] = {
    "fit_task": "mushin_box._train.configtask",
    "seed_pre_call": "mushin_box._train.configtask",
}

#: a stable name -> the name a code fingerprint hashes for it: the one it was first
#: recorded under, so that giving it a stable name re-runs no finished cell
FIRST_NAMES: dict[str, str] = {
    "mushin_box.fit_task": "mushin_box._sweep.launch.fit_task",
    "mushin_box.seed_pre_call": "mushin_box._sweep.launch.seed_pre_call",
}

T = TypeVar("T")


def public(obj: T) -> T:
    """Declare ``obj`` part of ``mushin_box``: its ``__module__`` becomes ``mushin_box``."""
    obj.__module__ = "mushin_box"  # pyright: ignore[reportAttributeAccessIssue]
    return obj
