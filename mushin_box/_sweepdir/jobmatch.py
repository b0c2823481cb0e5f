# SPDX-License-Identifier: MIT
"""Which job of a submission runs a cell that waits, told by the jobs' overrides
(``mushin_jobs.json``): ``status`` names a pending cell's job and squeue's reason for it;
and whether a live job may run some cell of a grid (:func:`grid_runs`: a resume refuses
to start a second copy of such a cell).

Design note: one index, not a scan of the jobs per cell. A detached launch of 10,000 cells
records 10,000 jobs (an array task each); checking each waiting cell against every job's
overrides was 28 million checks, 56 s of a ``status`` of such a sweep with a quarter of
it done. Here each job's overrides are read once, indexed by the values they give the
cell's swept keys, and a cell looks up each way an override may spell its values (one for
a number, up to four for a string: :func:`spellings`). The answer is the scan's: the
first job, in the submission's order, whose overrides set every swept value of the cell.

Examples
--------
>>> find = job_finder({"9_0": ["x=1", "tag='a'"], "9_1": ["x=2"], "9_2": ["x=2"]})
>>> find({"x": 2}), find({"x": 3}), find({})
('9_1', None, None)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["grid_runs", "job_finder", "job_runs_cell", "spellings"]

#: a cell whose values have more spellings together than this is matched by a scan
_MOST_LOOKUPS = 64


def spellings(value: Any) -> set[str]:
    """How an override may spell ``value`` (Hydra's sweeper unquotes plain strings).

    >>> sorted(spellings("adam")), spellings(0.1), spellings(object())
    (['"adam"', "'adam'", 'adam'], {'0.1'}, set())
    """
    from mushin_box._core.overrides import format_value

    try:
        out = {format_value(value)}
    except (TypeError, ValueError):
        return set()
    if isinstance(value, str):
        out |= {value, f"'{value}'", f'"{value}"'}
    return out


def _given(overrides: Any) -> dict[str, str] | None:
    """``{key: value text}`` a job's overrides (``["lr=0.1", ...]``) set; None: not a list."""
    if not isinstance(overrides, list):
        return None
    given: dict[str, str] = {}
    for item in overrides:
        if isinstance(item, str) and "=" in item:
            key, _, value = item.partition("=")
            given[key.lstrip("+~")] = value
    return given


def job_finder(jobs: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], str | None]:
    """``find(combo)``: the first of ``jobs`` (``{job id: overrides}``, in the submission's
    order) whose overrides set every swept value of ``combo``, or None (an empty combo
    has none)."""
    parsed = [(job, given) for job, o in jobs.items() if (given := _given(o)) is not None]
    indexes: dict[tuple[str, ...], dict[tuple[str | None, ...], int]] = {}

    def find(combo: Mapping[str, Any]) -> str | None:
        if not combo:
            return None
        keys = tuple(combo)
        ways = [spellings(v) for v in combo.values()]
        if not all(ways):
            return None
        count = 1
        for way in ways:
            count *= len(way)
        if count > _MOST_LOOKUPS:  # many string values: a scan is cheaper
            found = (
                j for j, g in parsed if all(g.get(k) in w for k, w in zip(keys, ways, strict=True))
            )
            return next(found, None)
        index = indexes.get(keys)
        if index is None:  # the position of the first job for each set of values
            index = indexes[keys] = {}
            for at, (_, given) in enumerate(parsed):
                index.setdefault(tuple(given.get(k) for k in keys), at)
        hits = [index[t] for t in itertools.product(*ways) if t in index]
        return parsed[min(hits)][0] if hits else None

    return find


def _setting(overrides: Any) -> dict[str, str] | None:
    """``{key: value text}`` every item of a job's overrides sets (an item without ``=``
    sets its key to nothing); None when they are not a list of strings (they say nothing
    of the cells the job runs)."""
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        return None
    return {o.partition("=")[0].lstrip("+~"): o.partition("=")[2] for o in overrides}


def job_runs_cell(overrides: Any, combo: Mapping[str, Any]) -> bool:
    """May a job whose overrides (``mushin_jobs.json``) are ``overrides`` run the cell of
    ``combo``? Yes unless its overrides set one of the cell's swept keys to another value;
    overrides that are not a list of strings, or a value with no override spelling, say
    nothing, so: yes (never run a cell twice).

    Examples
    --------
    >>> job_runs_cell(["x=1", "tag=b"], {"x": 1}), job_runs_cell(["x=2"], {"x": 1})
    (True, False)
    >>> job_runs_cell(None, {"x": 1}), job_runs_cell(["x='a'"], {"x": "a"})
    (True, True)
    """
    given = _setting(overrides)
    if given is None:
        return True
    for key, value in combo.items():
        if key not in given:
            continue
        spelled = spellings(value)
        if not spelled:
            return True
        if given[key] not in spelled:
            return False
    return True


def grid_runs(grid: Mapping[str, Sequence[Any]]) -> Callable[[Any], bool]:
    """``runs(overrides)``: may a job whose overrides are ``overrides`` run some cell of
    ``grid`` (every combination of its values)? What
    ``any(job_runs_cell(overrides, cell) for cell in cells)`` says, without a pass over
    the cells for each job: the cells are every combination, so the scan's answer is
    decided key by key, in the grid's order (a key with a value that has no spelling
    says yes, as :func:`job_runs_cell` does, once the keys before it matched).

    Examples
    --------
    >>> runs = grid_runs({"x": [1, 2], "tag": ["a"]})
    >>> runs(["x=2", "tag='a'"]), runs(["x=3"]), runs(["seed=7"]), runs(None)
    (True, False, True, True)
    """
    if any(not values for values in grid.values()):
        return lambda overrides: False  # no cell at all
    # a key's spellings; None: one of its values has none
    ways: dict[str, set[str] | None] = {}
    for key, values in grid.items():
        spelled = [spellings(v) for v in values]
        ways[key] = None if not all(spelled) else set().union(*spelled)

    def runs(overrides: Any) -> bool:
        given = _setting(overrides)
        if given is None:
            return True
        for key, spelled in ways.items():
            if key not in given:
                continue
            if spelled is None:
                return True
            if given[key] not in spelled:
                return False
        return True

    return runs
