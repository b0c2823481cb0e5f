# SPDX-License-Identifier: MIT
"""Each attempt of a cell's fit, and the worlds it ran in: ``run.elastic``, ``run.attempts``
and ``run.world_changes``.

Each attempt (a requeue, a torchrun restart, a ``resume`` with fewer GPUs) knows only its
own world, so it carries the earlier ones forward from the last record. Where the world
changed is known from the fit's ``starts``, else only from the attempts' world sizes.

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
    """``run.elastic``: torchrun's restarts so far and the most it allows.

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
    """The larger of SLURM's and torchrun's restart counts, and its variable."""
    counts = [
        (_count(env, name) or 0, name)
        for name in ("SLURM_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT")
    ]
    return max(counts, key=lambda pair: pair[0])


def restarts(env: Mapping[str, str]) -> dict[str, Any]:
    """A status's ``restarts`` and ``restarts_left`` (None: SLURM's); nothing at first.

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
    """The seconds the earlier attempts of this fit took: the previous status's
    ``duration_s``, or for one of this run that died without a word, up to now."""
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
    """A status's ``duration_s`` (every attempt) and, after earlier ones, ``attempt_s``.

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
    """This attempt's entry of ``run.attempts`` (``epoch``: set by :func:`finished_run`).

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
    """The earlier attempts of this fit, from the last record (an older one's world: one
    entry); nothing for a fresh start.

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
    """Where the fit went on at another world size (without ``starts``: the attempts').

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
    """``run``, its attempts' ``epoch`` and ``world_changes`` set from the fit's ``starts``."""
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
    # reversed: of a fit started twice in one attempt, the first start's epoch wins
    epochs = {r["attempt"]: r["epoch"] for r in reversed(fits) if _int(r["attempt"]) is not None}
    rows = [dict(row) if isinstance(row, Mapping) else {} for row in attempts]
    for entry in rows:
        number = _int(entry.get("attempt"))
        if number in epochs:
            entry["epoch"] = epochs[number]
    return {**run, "attempts": rows, "world_changes": world_changes(fits, rows)}
