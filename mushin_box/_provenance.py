# SPDX-License-Identifier: MIT
"""Provenance records (basic form): what a cell ran with, secrets redacted.

Two parts, as the provenance design says: ``reproducibility`` (must match for two runs to
be the same experiment) and ``run`` (may differ: host, times, topology).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import inspect
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["REDACTED", "basic_provenance", "git_state", "is_secret_name", "redact"]

REDACTED = "<redacted>"
_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "key",
        "apikey",
        "auth",
        "passphrase",
        "private",
        "cookie",
        "session",
    }  # fmt: skip
)
_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PACKAGES = ("torch", "pytorch-lightning", "hydra-core", "hydra-zen", "submitit", "numpy")


def is_secret_name(name: str) -> bool:
    """Does a config key or environment variable name look like it holds a secret?

    Examples
    --------
    >>> [is_secret_name(n) for n in ("WANDB_API_KEY", "hfToken", "db.password", "lr")]
    [True, True, True, False]
    """
    words = _SPLIT.split(_CAMEL.sub("_", name).lower())
    return any(w in _SECRET_WORDS for w in words if w)


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with the values of secret-looking keys replaced."""
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v is not None else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.decode("utf-8", "replace")


def git_state(path: Path) -> dict[str, Any] | None:
    """Commit, dirty flag and sha256 of the uncommitted diff of the repo holding ``path``."""
    cwd = path if path.is_dir() else path.parent
    commit = _git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return None
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd) or ""
    diff = _git(["diff", "HEAD"], cwd) or ""
    return {
        "commit": commit.strip(),
        "dirty": bool(status.strip()),
        "diff_sha256": hashlib.sha256(diff.encode("utf-8")).hexdigest() if diff else None,
    }


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def basic_provenance(
    *, task: Callable[..., Any], config: Any, fingerprints: Mapping[str, str], seed_base: Any = None
) -> dict[str, Any]:
    """The provenance record of one cell (the provenance issue extends it)."""
    from mushin_box import __version__

    try:
        source = Path(inspect.getfile(inspect.unwrap(task)))
    except (TypeError, OSError):
        source = Path.cwd()
    return {
        "schema": 1,
        "reproducibility": {
            "code": {"git": git_state(source), "task_sha256": fingerprints.get("code")},
            "config": redact(config),
            "config_sha256": fingerprints.get("config"),
            "mushin_box": __version__,
            "packages": _versions(),
            "python": ".".join(map(str, sys.version_info[:3])),
            "seed_base": seed_base,
        },
        "run": {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "pid": os.getpid(),
            "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        },
    }
