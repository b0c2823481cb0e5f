# SPDX-License-Identifier: MIT
"""A cell's place on its sweep's grid, told without encoding JSON: how the readers put the
cells of a sweep in order (the grid's, then an earlier grid's cells by directory), from
the manifest's entries (:mod:`.settled`) or from the status records (:mod:`.board`).

Examples
--------
>>> [e["combo"] for e in in_grid_order({"x": [1, 2]}, [{"combo": {"x": 2}, "dir": "x=2"}])]
[{'x': 1}, {'x': 2}]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["Entry", "grid_key", "grid_keys", "in_grid_order"]

#: a cell as the manifest (or its status file) tells it
Entry = dict[str, Any]


def grid_key(combo: Mapping[str, Any], params: Sequence[str]) -> tuple[Any, ...] | None:
    """A cell's place on a grid of ``params``, its values told apart by type (``True`` is
    not ``1``, ``-0.0`` not ``0.0``): what ``combo_id`` tells, without encoding JSON. None:
    the cell swept other keys (an earlier grid).

    >>> grid_key({"b": 1, "a": True}, ["a", "b"]) == grid_key({"a": 1, "b": 1}, ["a", "b"])
    False
    >>> grid_key({"a": 1, "c": 2}, ["a", "b"]) is None
    True
    """
    if not isinstance(combo, Mapping) or len(combo) != len(params):
        return None
    try:
        return tuple(_one(combo[p]) for p in params)
    except KeyError:
        return None


#: values equal only when the same (a float is told by its repr: -0.0 == 0.0, nan != nan)
_EXACT = frozenset({int, str, bool, type(None)})


def _one(value: Any) -> tuple[type, Any]:
    kind = type(value)
    if kind in _EXACT:
        return kind, value
    if kind is float:
        return kind, repr(value)
    from mushin_box._core.sidecars import canonical_dumps  # a list or mapping: keys sorted

    return kind, canonical_dumps(value).decode("utf-8")


def grid_keys(grid: Mapping[str, Sequence[Any]]) -> Iterator[tuple[Any, ...]]:
    """The :func:`grid_key` of every point of ``grid``, in its order
    (``itertools.product``), each axis value's part told once.

    >>> list(grid_keys({"x": [1, 2]})) == [grid_key({"x": v}, ["x"]) for v in (1, 2)]
    True
    """
    return itertools.product(*([_one(v) for v in values] for values in grid.values()))


def in_grid_order(
    grid: Mapping[str, Sequence[Any]], entries: Iterable[Entry]
) -> list[Entry] | None:
    """``entries`` (each with a ``combo``) in ``read_sweep``'s order: every point of
    ``grid`` (``{"combo", "status": "pending"}`` for one no entry is at), then the entries
    off the grid (an earlier grid's) by directory; of two at one place, the later. None: an
    entry that is not an object with a ``combo`` object."""
    params = list(grid)
    by_key: dict[tuple[Any, ...], Entry] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("combo"), dict):
            return None
        key = grid_key(entry["combo"], params)
        by_key[key if key is not None else ("off", repr(entry["combo"]))] = entry
    out = []
    for key, values in zip(grid_keys(grid), itertools.product(*grid.values()), strict=True):
        entry = by_key.pop(key, None)
        if entry is None:
            entry = {"combo": dict(zip(params, values, strict=True)), "status": "pending"}
        out.append(entry)
    rest = [e for e in by_key.values() if isinstance(e.get("dir"), str)]
    return out + sorted(rest, key=lambda e: e["dir"])
