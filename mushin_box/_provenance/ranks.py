# SPDX-License-Identifier: MIT
"""Where each rank ran: its node, its Python and its image, recorded by every rank.

Rank 0 cannot see where the others ran, so every rank writes ``.mushin/ranks/rank<r>.json``
as it starts, and rank 0 folds them into its record (nothing infers another rank's node).
An image is its digest, else its path. Each rank also records how its task ended,
keeping the previous attempt's row as ``before``: one without ``ended`` died without a
word (SIGKILL, OOM), which names the rank a restarted cell lost (:func:`restart_cause`).

>>> rows = [{"rank": 0, "python": "3.11.2", "executable": "/usr/bin/python3",
...          "container": "/i.sif", "container_name": "i.sif", "sif_sha256": "ab"},
...         {"rank": 1, "python": "3.11.2", "executable": "/usr/bin/python3",
...          "container": None, "container_name": None, "sif_sha256": None}]
>>> summarize(rows)
{'python': ['3.11.2'], 'in_image': 'some', 'images': 1}
>>> [g["ranks"] for g in group(rows)]
[[0], [1]]
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import (
    FINGERPRINTS_FILE,
    IMAGE_IDENTITY_ENV,
    JOB_PRIVATE_DIR,
    RANKS_DIR,
    RUNTIME_ENV,
    TORCHRUN_EXITS_ENV,
)
from mushin_box._core.sidecars import read_json, write_json_atomic
from mushin_box._provenance.topology import RANK_COLUMNS, RankPlacement, topology_from_env

_FIELDS = ("python", "executable", "container", "container_name", "sif_sha256")
_MAX_RANKS = 65_536  # a bound on what a reader takes from a cell's directory
_RECORD = re.compile(r"rank[0-9]+\.json")  # _row_path's names


def rank_runtime(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """This process's placement, Python, and container (with its image's digest)."""
    env = os.environ if environ is None else environ
    found = {
        field: next((env[name] for name in names if env.get(name)), None)
        for field, names in RUNTIME_ENV.items()
    }
    own = topology_from_env(env).own
    return {
        "local_rank": own.local_rank,
        "node_rank": own.node_rank,
        "host": own.hostname or socket.gethostname(),
        "python": platform.python_version(),
        "executable": sys.executable,
        **found,
        "sif_sha256": (env.get(IMAGE_IDENTITY_ENV["sif_sha256"]) or None)
        if found["container"]
        else None,
    }


def _row_path(cell_dir: Path, rank: int) -> Path:
    return cell_dir / JOB_PRIVATE_DIR / RANKS_DIR / f"rank{int(rank)}.json"


def write_rank_runtime(cell_dir: Path, *, rank: int, attempt: int) -> None:
    """Every rank, as its cell starts; it drops the torchrun agent's note of an earlier
    holder of its pid (:func:`_exit_note`): a note names only the last holder's death."""
    path = _row_path(cell_dir, rank)
    record: dict[str, Any] = {"rank": int(rank), "attempt": int(attempt), **rank_runtime()}
    record["pid"] = os.getpid()
    old = read_json(path, default=None)
    if isinstance(old, dict) and isinstance(old.get("attempt"), int) and old["attempt"] != attempt:
        record["before"] = {k: old.get(k) for k in ("attempt", "host", "ended", "pid")}
    exits = os.environ.get(TORCHRUN_EXITS_ENV)
    if exits:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(exits, f"{os.getpid()}.json"))
    write_json_atomic(path, record)


def write_rank_end(cell_dir: Path, *, rank: int, attempt: int, how: str) -> None:
    """Every rank, as its task ends: ``completed``, or the exception's type."""
    path = _row_path(cell_dir, rank)
    row = read_json(path, default=None)
    if isinstance(row, dict) and row.get("attempt") == attempt:
        write_json_atomic(path, {**row, "ended": how})


def restart_cause(cell_dir: Path, attempt: int) -> dict[str, Any] | None:
    """The rank that ended the previous attempt (silent death first, else a raise), with
    the epoch this attempt's fit started at; ``None``: unknown."""
    rows = read_rank_runtimes(cell_dir, attempt=attempt)
    befores = [(r["rank"], r["before"]) for r in rows if isinstance(r.get("before"), Mapping)]
    ends = [{"rank": rank, **{k: b.get(k) for k in ("host", "ended")}} for rank, b in befores]
    silent = [e for e in ends if e["ended"] is None]
    raised = [e for e in ends if e["ended"] not in (None, "completed", "Terminated")]
    cause = (silent or raised or [None])[0]
    pid = dict(befores).get(cause["rank"], {}).get("pid") if cause else None
    if cause and cause["ended"] is None and isinstance(pid, int):
        cause.update(_exit_note(pid))
    prints = read_json(cell_dir / FINGERPRINTS_FILE, default=None)
    starts = prints.get("starts") if isinstance(prints, dict) else None
    epochs = [
        s.get("epoch") for s in starts or [] if isinstance(s, dict) and s.get("attempt") == attempt
    ]
    return cause and {**cause, "epoch": epochs[-1] if epochs else None}


def _exit_note(pid: int) -> dict[str, Any]:
    """How the torchrun worker of ``pid`` ended, from its agent's note; ``{}``: no note."""
    exits = os.environ.get(TORCHRUN_EXITS_ENV)
    note = read_json(Path(exits) / f"{int(pid)}.json", default=None) if exits else None
    code = note.get("exitcode") if isinstance(note, dict) else None
    if not isinstance(code, int) or isinstance(code, bool) or code == 0:
        return {}
    name = {s.value: s.name for s in signal.Signals}.get(-code)  # negative: killed by it
    return {"signal": name} if name else {"exitcode": code}


def read_rank_runtimes(cell_dir: Path, *, attempt: int | None) -> list[dict[str, Any]]:
    """The rank records of ``attempt`` (None: any), by rank; ill-formed ones left out."""
    directory = cell_dir / JOB_PRIVATE_DIR / RANKS_DIR
    try:  # a rank's record only: not the temporary file of a rank's write in flight
        names = sorted(
            e.name
            for e in os.scandir(directory)
            if _RECORD.fullmatch(e.name) and e.is_file(follow_symlinks=False)
        )
    except OSError:
        return []
    out = []
    for name in names[:_MAX_RANKS]:
        record = read_json(directory / name)
        if not isinstance(record, dict) or not isinstance(record.get("rank"), int):
            continue
        if attempt is not None and record.get("attempt") != attempt:
            continue
        out.append(record)
    return sorted(out, key=lambda r: r["rank"])


def group(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``run.rank_runtime``: the ranks grouped by identical runtime, in rank order."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(f) for f in _FIELDS), []).append(int(row["rank"]))
    return [
        {"ranks": ranks, **dict(zip(_FIELDS, key, strict=True))} for key, ranks in groups.items()
    ]


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``reproducibility.ranks``: what must not differ between two runs of an experiment."""
    inside = [r for r in rows if r.get("container")]
    in_image = "all" if len(inside) == len(rows) else "none" if not inside else "some"
    return {
        "python": sorted({str(r.get("python")) for r in rows}),
        "in_image": in_image,
        "images": len({r.get("sif_sha256") or ("path", r.get("container")) for r in inside}),
    }


def placements(topology: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """``run.topology.ranks``: each rank's own placement, with its recorded seed.

    >>> topo = {"rank_columns": ["global_rank", "local_rank", "node_rank", "hostname",
    ...         "seed"], "ranks": [[0, 0, 0, "a", 7]]}
    >>> placements(topo, [{"rank": 0, "local_rank": 0, "node_rank": 0, "host": "a"},
    ...                   {"rank": 1, "local_rank": 0, "node_rank": 1, "host": "b"}])
    [[0, 0, 0, 'a', 7], [1, 0, 1, 'b', None]]
    """
    known = {
        row[0]: RankPlacement(*row) for row in topology.get("ranks") or [] if isinstance(row, list)
    }
    for row in rows:
        local, node, rank = row.get("local_rank"), row.get("node_rank"), int(row["rank"])
        if isinstance(local, int) and isinstance(node, int):
            seed = known[rank].seed if rank in known else None
            known[rank] = RankPlacement(rank, local, node, row.get("host"), seed)
    return [list(known[rank]) for rank in sorted(known)]


def record_with_rank_runtime(
    record: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A copy of a record with the ranks' own records folded in (module doc)."""
    repro = {**dict(record.get("reproducibility") or {}), "ranks": summarize(rows)}
    run = {**dict(record.get("run") or {}), "rank_runtime": group(rows)}
    topology = run.get("topology")
    columns = list(RANK_COLUMNS)
    if isinstance(topology, Mapping) and topology.get("rank_columns", columns) == columns:
        nodes = _nodes(topology, rows)
        run["topology"] = {
            **topology,
            **({"nodes": nodes, "num_nodes": len(nodes)} if nodes is not None else {}),
            "rank_columns": columns,
            "ranks": placements(topology, rows),
        }
    return {**record, "reproducibility": repro, "run": run}


def _nodes(topology: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """``run.topology.nodes`` named by the ranks that ran there; None: nothing to add."""
    nodes = list(topology.get("nodes") or [])
    named = {
        row["node_rank"]: row["host"]
        for row in rows
        if isinstance(row.get("node_rank"), int)
        and 0 <= row["node_rank"] < _MAX_RANKS
        and isinstance(row.get("host"), str)
    }
    if not named:
        return None
    nodes += [None] * (max(named) + 1 - len(nodes))
    for node, host in named.items():
        nodes[node] = host
    return nodes
