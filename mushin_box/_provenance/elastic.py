# SPDX-License-Identifier: MIT
"""Each attempt of a cell's fit, and the worlds it ran in: ``run.elastic``, ``run.attempts``
and ``run.world_changes``.

Every attempt (a SLURM requeue, a torchrun restart, a ``resume`` with fewer GPUs)
rewrites the cell's record and knows only its own world, so the earlier attempts are
carried forward from the record the previous one left, while this attempt continues the
same fit; a fresh start begins a new list.

Where the fit went on at another world size is known best by the fit itself:
``MetricsCallback`` checkpoints one entry per fit start (epoch, world size, attempt:
``starts`` in ``fit_fingerprints.json``), so an attempt killed before its next checkpoint
leaves no trace. Without it, the attempts' world sizes say only that the world changed
(``"epoch": null``). All of it is ``run``: another world size is the same experiment.

Examples
--------
>>> earlier = {"run": {"attempts": [{"attempt": 1, "restart": 0, "world_size": 2,
...                                  "started": "t1", "launcher": "torchrun"}]}}
>>> entry = attempt_entry({"TORCHELASTIC_RESTART_COUNT": "0"}, attempt=2, world_size=1,
...                       started="t2", launcher="hydraddp")
>>> run = {"attempts": carried_attempts(earlier, continues=True) + [entry]}
>>> starts = [{"epoch": 0, "world_size": 2, "attempt": 1},
...           {"epoch": 2, "world_size": 1, "attempt": 2}]
>>> done = finished_run(run, starts)
>>> [(a["attempt"], a["world_size"], a["epoch"]) for a in done["attempts"]]
[(1, 2, 0), (2, 1, 2)]
>>> done["world_changes"]
[{'epoch': 2, 'from': 2, 'to': 1}]
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any


def _count(env: Mapping[str, Any], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def elastic_from_env(env: Mapping[str, str]) -> dict[str, Any] | None:
    """``run.elastic``: torchrun's restarts of this worker group and the most it allows
    (``None`` outside torchrun).

    Examples
    --------
    >>> elastic_from_env({"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "2"})
    {'restarts': 1, 'max_restarts': 2}
    >>> elastic_from_env({}) is None
    True
    """
    if "TORCHELASTIC_RESTART_COUNT" not in env:
        return None
    return {
        "restarts": _count(env, "TORCHELASTIC_RESTART_COUNT"),
        "max_restarts": _count(env, "TORCHELASTIC_MAX_RESTARTS"),
    }


def restart_count(env: Mapping[str, str]) -> tuple[int, str]:
    """SLURM's restart count of this job, or torchrun's of this worker group, and the
    variable that said it."""
    counts = [
        (_count(env, name) or 0, name)
        for name in ("SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
    ]
    return max(counts, key=lambda pair: pair[0])


def restarts(env: Mapping[str, str]) -> dict[str, Any]:
    """A status's ``restarts`` (torchrun's or SLURM's, so far) and ``restarts_left``
    (torchrun's; None for SLURM); nothing for a first start.

    Examples
    --------
    >>> restarts({"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "3"})
    {'restarts': 1, 'restarts_left': 2}
    """
    count, _ = restart_count(env)
    if not count:
        return {}
    elastic = elastic_from_env(env) or {}
    most = elastic.get("max_restarts")
    left = most - count if isinstance(most, int) and elastic.get("restarts") == count else None
    return {"restarts": count, "restarts_left": left}


def earlier_s(previous: Mapping[str, Any], continues: bool, run_id: str) -> float:
    """The seconds the earlier attempts of a fit this attempt continues took: the previous
    status's ``duration_s``; for one that died without a word in this run (rank 0 killed),
    its earlier ones and the time from its start to now. 0 for a fresh start."""
    if not continues:
        return 0.0
    earlier = previous.get("earlier_s")
    earlier = float(earlier) if isinstance(earlier, int | float) else 0.0
    if previous.get("status") != "running":
        spent = previous.get("duration_s")
        return float(spent) if isinstance(spent, int | float) else earlier
    if previous.get("run_id") != run_id:
        return earlier
    try:
        start = datetime.datetime.fromisoformat(str(previous.get("started")))
    except ValueError:
        return earlier
    return round(earlier + max(0.0, time.time() - start.timestamp()), 3)


def spent(running: Mapping[str, Any], seconds: float) -> dict[str, float]:
    """A status's durations: ``duration_s`` sums every attempt of the fit, and, when there
    were earlier ones, ``attempt_s`` is this attempt's alone.

    Examples
    --------
    >>> spent({"earlier_s": 50.0}, 10.0)
    {'duration_s': 60.0, 'attempt_s': 10.0}
    """
    earlier = running.get("earlier_s") or 0.0
    if not earlier:
        return {"duration_s": round(seconds, 3)}
    return {"duration_s": round(earlier + seconds, 3), "attempt_s": round(seconds, 3)}


def attempt_entry(
    env: Mapping[str, str],
    *,
    attempt: int | None,
    world_size: int | None,
    started: str | None,
    launcher: str | None,
) -> dict[str, Any]:
    """This attempt's entry of ``run.attempts``: torchrun's ``restart`` and SLURM's
    ``requeue`` count (0 where they don't apply); ``epoch`` is ``None`` until
    :func:`finished_run` knows it.

    Examples
    --------
    >>> row = attempt_entry({"SLURM_RESTART_COUNT": "2", "TORCHELASTIC_RESTART_COUNT": "1"},
    ...                     attempt=3, world_size=8, started="t", launcher="torchrun")
    >>> row["restart"], row["requeue"]
    (1, 2)
    """
    return {
        "attempt": attempt,
        "restart": _count(env, "TORCHELASTIC_RESTART_COUNT") or 0,
        "requeue": _count(env, "SLURM_RESTART_COUNT") or 0,
        "world_size": world_size,
        "started": started,
        "launcher": launcher,
        "epoch": None,
    }


def carried_attempts(previous: Any, *, continues: bool) -> list[dict[str, Any]]:
    """The earlier attempts of this fit, from the record the last attempt left: its
    ``run.attempts``, or one entry made from an older record's world. Nothing for a fresh
    start or no record.

    Examples
    --------
    >>> old = {"run": {"started": "t0", "topology": {"world_size": 4},
    ...                "launcher": {"kind": "slurm"}}}
    >>> carried_attempts(old, continues=True)[0]["world_size"]
    4
    >>> carried_attempts(old, continues=False)
    []
    """
    run = previous.get("run") if isinstance(previous, Mapping) else None
    if not continues or not isinstance(run, Mapping):
        return []
    rows = run.get("attempts")
    if isinstance(rows, list):
        return [dict(row) for row in rows if isinstance(row, Mapping)]
    topology = run.get("topology")
    launcher = run.get("launcher")
    elastic = run.get("elastic")
    return [
        {
            "attempt": None,
            "restart": elastic.get("restarts") if isinstance(elastic, Mapping) else None,
            "requeue": None,
            "world_size": topology.get("world_size") if isinstance(topology, Mapping) else None,
            "started": run.get("started"),
            "launcher": launcher.get("kind") if isinstance(launcher, Mapping) else None,
            "epoch": None,
        }
    ]


def world_changes(
    starts: Sequence[Mapping[str, Any]], attempts: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Where the fit went on at another world size: ``{"epoch", "from", "to"}`` for each
    fit start whose world differs from the one before it. Without ``starts``, the attempts'
    world sizes, with ``"epoch": None``.

    Examples
    --------
    >>> world_changes([{"epoch": 0, "world_size": 4}, {"epoch": 3, "world_size": 4},
    ...                {"epoch": 5, "world_size": 2}])
    [{'epoch': 5, 'from': 4, 'to': 2}]
    >>> world_changes([], [{"world_size": 2}, {"world_size": 1}])
    [{'epoch': None, 'from': 2, 'to': 1}]
    """
    rows: list[Mapping[str, Any]] = list(starts) or [
        {"epoch": None, "world_size": a.get("world_size")}
        for a in attempts
        if _int(a.get("world_size")) is not None
    ]
    return [
        {"epoch": b.get("epoch"), "from": a["world_size"], "to": b["world_size"]}
        for a, b in zip(rows, rows[1:], strict=False)
        if a["world_size"] != b["world_size"]
    ]


def finished_run(run: Mapping[str, Any], starts: Any) -> dict[str, Any]:
    """A copy of a record's ``run`` completed from the fit's ``starts``
    (``fit_fingerprints.json``): each attempt's ``epoch`` (by attempt number) and
    ``world_changes``. A run without ``attempts`` is returned as it is."""
    attempts = run.get("attempts")
    if not isinstance(attempts, list):
        return dict(run)
    fits = [  # the well-formed entries: epoch and world size are integers
        {"epoch": row["epoch"], "world_size": row["world_size"], "attempt": row.get("attempt")}
        for row in (starts if isinstance(starts, list) else [])
        if isinstance(row, Mapping)
        and _int(row.get("epoch")) is not None
        and _int(row.get("world_size")) is not None
    ]
    epochs: dict[int, int] = {}
    for row in fits:  # a fit started twice in one attempt (fit, then fit again): the first
        number = _int(row.get("attempt"))
        if number is not None:
            epochs.setdefault(number, row["epoch"])
    rows = []
    for row in attempts:
        entry = dict(row) if isinstance(row, Mapping) else {}
        number = _int(entry.get("attempt"))
        if number in epochs:
            entry["epoch"] = epochs[number]
        rows.append(entry)
    return {**run, "attempts": rows, "world_changes": world_changes(fits, rows)}
