# SPDX-License-Identifier: MIT
"""The basic provenance record (secrets redacted) and its sources: the experiment's git
state and the installed package set (read once per process).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import os
import platform
import re
import socket
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mushin_box._core.layout import PACKAGES_FILE
from mushin_box._core.procs import git
from mushin_box._core.redact import redact
from mushin_box._core.sidecars import timestamp
from mushin_box._core.version import __version__
from mushin_box._provenance.task import task_locator

#: starts each untracked file's entry in the diff (:func:`git_tree`)
UNTRACKED_MARK = b"\0untracked "
_NAME_SEPARATORS = re.compile(r"[-_.]+")
#: packages whose versions the record names one by one, for readability (canonical names)
KEY_PACKAGES: tuple[str, ...] = (
    "torch",
    "pytorch-lightning",
    "hydra-core",
    "hydra-zen",
    "submitit",
    "numpy",
)


def git_root(path: Path) -> str | None:
    """The top directory of the git checkout holding ``path``, or None outside git."""
    top = git(["rev-parse", "--show-toplevel"], path if path.is_dir() else path.parent)
    return top.strip() if top else None


def git_tree(path: Path, *, include: Iterable[str | Path] = ()) -> tuple[str, bool, bytes] | None:
    """Commit, dirty flag and uncommitted diff of the repo holding ``path`` (None outside
    git): ``git diff HEAD``, then ``\\0untracked PATH\\0`` and the content of each file of
    ``include`` git does not track (it ran, so it is part of the code)."""
    cwd = path if path.is_dir() else path.parent
    commit = git(["rev-parse", "HEAD"], cwd)
    if commit is None:
        return None
    status = git(["status", "--porcelain", "--untracked-files=no"], cwd) or ""
    diff = (git(["diff", "HEAD"], cwd) or "").encode("utf-8")
    files = sorted({Path(f).resolve() for f in include})
    root = Path(git_root(cwd) or cwd)
    others = git(["ls-files", "--others", "--exclude-standard", "-z"], root) if files else ""
    untracked = set((others or "").split("\0"))
    for file in files:
        rel = file.relative_to(root).as_posix() if file.is_relative_to(root) else None
        if rel in untracked and file.is_file():
            diff += UNTRACKED_MARK + rel.encode() + b"\0" + file.read_bytes()
    return commit.strip(), bool(status.strip()) or UNTRACKED_MARK in diff, diff


def git_state(path: Path, *, include: Iterable[str | Path] = ()) -> dict[str, Any] | None:
    """:func:`git_tree`, with the diff's sha256 for the diff."""
    tree = git_tree(path, include=include)
    if tree is None:
        return None
    commit, dirty, diff = tree
    return {
        "commit": commit,
        "dirty": dirty,
        "diff_sha256": hashlib.sha256(diff).hexdigest() if diff else None,
    }


def experiment_state(
    file: str | os.PathLike[str] | None, task: Callable[..., Any], include: Iterable[str] = ()
) -> dict[str, Any]:
    """The experiment file (given, else the task's) and its :func:`git_state`: taken by the
    driver, so that every cell records the user's repository (a rank may have no git)."""
    file = task_file(task) if file is None else file
    path = Path(file).resolve() if file is not None else Path.cwd()
    return {
        "file": str(path) if file is not None else None,
        "git": git_state(path, include=include),
    }


def task_file(task: Callable[..., Any]) -> Path | None:
    """The file defining ``task`` (a ``partial``'s function's), None when there is none."""
    try:
        return Path(inspect.getfile(inspect.unwrap(getattr(task, "func", task))))
    except (TypeError, OSError):
        return None


def _experiment_run(experiment: Mapping[str, Any]) -> dict[str, Any]:
    """``run.experiment``: the file, and the kept dirty code (``patch``)."""
    patch = experiment.get("patch")
    return {"file": experiment.get("file"), **({"patch": patch} if patch else {})}


def canonical_package_name(name: str) -> str:
    """A distribution name in its canonical form (PEP 503: lower case, ``-`` separators).

    >>> canonical_package_name("Hydra_Zen"), canonical_package_name("zope.interface")
    ('hydra-zen', 'zope-interface')
    """
    return _NAME_SEPARATORS.sub("-", name).lower().strip()


def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str | None, str | None]:
    """From the headers only: ``dist.metadata`` parses the long description too (slow)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = None
    for line in text.partition("\n\n")[0].splitlines():
        if name is None and line.startswith("Name:"):
            name = line[5:].strip()
        elif version is None and line.startswith("Version:"):
            version = line[8:].strip()
    return name or None, version or None


@functools.cache
def installed_packages() -> tuple[str, ...]:
    """Every installed distribution as ``name==version`` (canonical names, sorted), once
    per process; of a name installed twice, the one ``import`` finds.

    >>> names = [line.partition("==")[0] for line in installed_packages()]
    >>> "hydra-core" in names, names == sorted(set(names))
    (True, True)
    """
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name, version = _name_and_version(dist)
        if name is None:  # broken metadata: nothing to name it by
            continue
        seen.setdefault(canonical_package_name(name), version or "unknown")
    return tuple(f"{name}=={seen[name]}" for name in sorted(seen))


def packages_text(lines: Iterable[str]) -> str:
    """The text of ``mushin_packages.txt``: one ``name==version`` a line.

    >>> packages_text(["attrs==26.1.0", "torch==2.13.0"])
    'attrs==26.1.0\\ntorch==2.13.0\\n'
    """
    return "".join(f"{line}\n" for line in lines)


def package_set(lines: Sequence[str]) -> dict[str, Any]:
    """The record's ``package_set``: its ``sha256`` is ``sha256sum mushin_packages.txt``'s.

    >>> package_set(["attrs==26.1.0"])["count"]
    1
    >>> import hashlib
    >>> package_set([])["sha256"] == hashlib.sha256(b"").hexdigest()
    True
    """
    text = packages_text(lines)
    return {
        "count": len(lines),
        "file": PACKAGES_FILE,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }


def key_versions(lines: Iterable[str]) -> dict[str, str | None]:
    """The versions of :data:`KEY_PACKAGES` in a ``name==version`` list (``None``: absent).

    >>> key_versions(["numpy==2.4.6", "torch==2.13.0+cpu"])["torch"]
    '2.13.0+cpu'
    """
    versions = package_versions(lines)
    return {name: versions.get(name) for name in KEY_PACKAGES}


def package_versions(lines: Iterable[str]) -> dict[str, str]:
    """``{name: version}`` of a ``name==version`` list (blank lines skipped).

    >>> package_versions(["numpy==2.4.6", "", "torch==2.13.0+cpu"])
    {'numpy': '2.4.6', 'torch': '2.13.0+cpu'}
    """
    pairs = (line.strip().partition("==") for line in lines)
    return {name: version for name, _, version in pairs if name}


def basic_provenance(
    *,
    task: Callable[..., Any],
    config: Any,
    fingerprints: Mapping[str, str],
    seed_base: Any = None,
    pre_call: Callable[..., Any] | None = None,
    experiment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The basic record of one cell; ``code.git``: ``experiment``'s, else the task file's."""
    state = (
        git_state(task_file(task) or Path.cwd()) if experiment is None else experiment.get("git")
    )
    packages = installed_packages()
    return {
        "schema": 1,
        "reproducibility": {
            "code": {"git": state, "task_sha256": fingerprints.get("code")},
            "config": redact(config),
            "config_sha256": fingerprints.get("config"),
            "mushin_box": __version__,
            "package_set": package_set(packages),
            "packages": key_versions(packages),
            "python": ".".join(map(str, sys.version_info[:3])),
            "seed_base": seed_base,
        },
        "run": {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "pid": os.getpid(),
            "started": timestamp(),
            "task": task_locator(task, pre_call),
            **({"experiment": _experiment_run(experiment)} if experiment else {}),
        },
    }
