# SPDX-License-Identifier: MIT
"""The launch record: what ``mushin-box launch`` was asked (a secret's value as
``REDACTED``: a resume asks for it again), which ``resume DIR`` replays so that it cannot
forget an override and restart a cell from scratch. It sits in a shared directory and a
resume imports the experiment it names, so it is read bounded, checked field by field, and
refused unless it and its experiment file are the user's own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import LAUNCH_FILE
from mushin_box._core.redact import REDACTED, command_line_secrets
from mushin_box._core.sidecars import read_json, timestamp, write_bytes_atomic, write_json_atomic
from mushin_box._core.targets import public
from mushin_box._core.userfile import owner_problem

#: the recorded flags (``launch``'s argparse names) and the types each may hold
FLAG_TYPES: Mapping[str, tuple[type, ...]] = {
    **dict.fromkeys(("nodes", "min_nodes", "gpus"), (int,)),
    **dict.fromkeys(("local", "slurm", "torchrun"), (bool,)),
    "max_restarts": (int,),
    **dict.fromkeys(("profile", "image"), (str,)),
    "bind": (list,),
    **dict.fromkeys(("image_python", "partition", "account", "qos"), (str,)),
    **dict.fromkeys(("constraint", "exclude", "job_name"), (str,)),
    **dict.fromkeys(("time", "cpus_per_task", "mem", "mem_gb", "max_parallel"), (int,)),
    "sbatch": (list,),
    "on_error": (str,),
}


@public
class RecordError(MushinBoxError, ValueError):
    """The sweep has no usable launch record; the message names the fix."""


def launch_record(
    experiment: str, overrides: Sequence[str], flags: Mapping[str, Any], *, cwd: str
) -> dict[str, Any]:
    """The record of a launch: ``flags`` are the launch's parsed flags (``args``' names,
    None: not given); a secret override's value is replaced by ``REDACTED``.

    >>> r = launch_record("x.py", ["lr=0.1", "+api_key=abc123"], {"nodes": 2}, cwd="/p")
    >>> r["overrides"], r["flags"], r["experiment"]
    (['lr=0.1', '+api_key=<redacted>'], {'nodes': 2}, '/p/x.py')
    """
    shown = []
    for text in overrides:
        key, sep, _ = text.partition("=")
        secret = bool(sep) and bool(command_line_secrets([text]))
        shown.append(f"{key}={REDACTED}" if secret else text)
    path = experiment.split(":", 1)[0]
    if path.endswith(".py") or os.path.isfile(os.path.join(cwd, path)):
        experiment = os.path.normpath(os.path.join(cwd, path)) + experiment[len(path) :]
    kept = {k: (list(v) if isinstance(v, tuple) else v) for k, v in flags.items()}
    return {
        "schema": 1,
        "experiment": experiment,
        "cwd": cwd,
        "overrides": shown,
        "flags": {k: v for k, v in kept.items() if k in FLAG_TYPES and v is not None},
        "launched": timestamp(),
    }


def read_launch_record(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The sweep's launch record, checked field by field (:class:`RecordError`: none, not
    a launch record, or it or its experiment file is not the user's own)."""
    path = Path(root) / LAUNCH_FILE
    if not path.exists():
        raise RecordError(
            f"{root} holds no launch record ({LAUNCH_FILE}): it was not made by "
            "`mushin-box launch` (or by one older than resume); resume it with the launch's "
            "own command line and `--resume --working-dir DIR`, or resume=True in Python"
        )
    data = read_json(path)
    flags = data.get("flags") if isinstance(data, dict) else None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("experiment"), str)
        and isinstance(data.get("cwd"), str)
        and isinstance(data.get("overrides"), list)
        and all(isinstance(o, str) for o in data["overrides"])
        and isinstance(flags, dict)
    ):
        raise RecordError(f"{path} is not a launch record; fix or delete it")
    for key, value in flags.items():
        types = FLAG_TYPES.get(key, ())
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise RecordError(f"{path}: flag {key!r} = {value!r} is not a launch flag; fix it")
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise RecordError(f"{path}: flag {key!r} must be a list of strings; fix it")
    # neither the record nor the file it names may be another user's (a module spec is
    # imported by name, from the installed packages)
    problem = owner_problem(path)
    if problem is not None:
        raise RecordError(
            f"{path} {problem}: a resume imports the experiment this file names, so it "
            "replays only your own launch records; run the launch again yourself"
        )
    file = data["experiment"].split(":", 1)[0]
    if os.path.isabs(file) and os.path.exists(file):  # a missing one: the launch says so
        problem = owner_problem(Path(file))
        if problem is not None:
            raise RecordError(
                f"the experiment {file} {problem}: a resume imports it; make it yours "
                "(chown, chmod go-w) or launch from your own copy"
            )
    return data


@contextmanager
def recorded(root: Path, record: Mapping[str, Any] | None, started: Any) -> Iterator[None]:
    """Write ``record`` for the launch inside the block; put the previous record back (or
    remove it) when the block raises before the launch started (``started()`` false)."""
    if record is None:
        yield
        return
    path = root / LAUNCH_FILE
    try:
        before = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        before = None
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, dict(record))
    try:
        yield
    except BaseException:
        if not started():
            try:
                if before is None:
                    path.unlink(missing_ok=True)
                else:
                    write_bytes_atomic(path, before)
            except OSError:
                pass
        raise
