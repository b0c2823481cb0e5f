# SPDX-License-Identifier: MIT
"""The code a cell ran, checked out beside the user's tree (``reproduce --worktree``).

Switching the user's checkout back to the cell's commit would put their newer work at
risk, so the cell's commit is checked out in a git worktree of the same repository, with
the uncommitted code the cell ran applied from its sweep's copy
(:mod:`mushin_box._provenance.patch`). The worktree lies in the re-run's sweep
(:data:`~mushin_box._core.layout.WORKTREE_DIR`): on the shared filesystem, where every
rank can import it, and kept with the re-run whose record names its files.

The record's paths under the repository are read under the worktree (:func:`rebased`);
every check of :mod:`~mushin_box._reproduce.trust` still applies, so a copy that does not
rebuild the cell's tree is refused like any other checkout.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import code_patch_file
from mushin_box._core.safeio import UnsafeFileError, inside, read_bounded
from mushin_box._provenance.patch import PATCH_LIMIT
from mushin_box._provenance.record import UNTRACKED_MARK, git_root
from mushin_box._reproduce.checks import Original, ReproduceError, part

HEX = re.compile(r"[0-9a-f]{40,64}")


def kept_patch(original: Original, sha: str) -> tuple[Path, bytes, list[str]]:
    """The sweep's copy of the uncommitted code whose sha256 is ``sha``: its path, its
    bytes, and the untracked files it writes. Refused when missing, of another sha256, or
    writing outside the repository (anyone could have put it there).
    """
    sweep = original.cell_dir.parent
    try:
        path = inside(sweep, sweep / code_patch_file(sha))
        data = read_bounded(path, PATCH_LIMIT)
    except (OSError, UnsafeFileError):
        raise ReproduceError(
            "the sweep keeps no copy of that code (the launch said why), so only that tree runs it"
        ) from None
    names = [
        e.partition(b"\0")[0].decode("utf-8", "replace") for e in data.split(UNTRACKED_MARK)[1:]
    ]
    if hashlib.sha256(data).hexdigest() != sha or not all(map(_relative, names)):
        raise ReproduceError(
            f"{path} is not the code the cell ran (its sha256 differs); restore it"
        )
    return path, data, names


def _relative(name: str) -> bool:
    """A path git would write inside the repository: relative, with no ``..``."""
    return bool(name) and not name.startswith("/") and ".." not in name.split("/")


def _git(args: list[str], cwd: Path) -> str:
    """Run git; its last line of error as a :class:`ReproduceError` when it fails."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode:
        said = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ReproduceError(
            f"git {args[0]} in {cwd} failed: {said}; mend that and run this again, or drop "
            "{worktree} and check the cell's code out yourself",
            arguments={"worktree": True},
        )
    return proc.stdout


def _repository(file: Any) -> Path | None:
    """The git repository holding the recorded experiment file, or its nearest directory
    still there (a file renamed or deleted since is still its repository's)."""
    if not isinstance(file, str) or not file.startswith("/"):
        return None
    here = Path(file).parent
    while not here.is_dir() and here != here.parent:
        here = here.parent
    top = git_root(here)
    return Path(top).resolve() if top else None


def checkout(original: Original, where: Path) -> Original:
    """Check out the code ``original`` ran at ``where`` (a new directory): its commit, in a
    worktree of the repository holding its experiment file, with its uncommitted code
    applied from the sweep's copy; return ``original`` with its paths there.
    """
    recorded = part(original.repro, "code").get("git")
    commit = recorded.get("commit") if isinstance(recorded, Mapping) else None
    if not isinstance(commit, str) or not HEX.fullmatch(commit):
        raise ReproduceError(
            "the cell's code ran in no git checkout, so there is no commit to check out: "
            "drop {worktree}",
            arguments={"worktree": True},
        )
    file = part(original.run, "experiment").get("file")
    top = _repository(file)
    if top is None:
        raise ReproduceError(
            f"no git repository holds the cell's experiment file {file} here: run this on "
            "a machine with its repository at that path"
        )
    try:
        _git(["cat-file", "-e", f"{commit}^{{commit}}"], top)
    except ReproduceError:
        raise ReproduceError(
            f"the repository {top} does not hold the cell's commit {commit}: fetch it "
            f"(git -C {top} fetch), then run this again"
        ) from None
    sha = recorded.get("diff_sha256") if isinstance(recorded, Mapping) else None
    kept = kept_patch(original, sha) if isinstance(sha, str) and HEX.fullmatch(sha) else None
    where.parent.mkdir(parents=True, exist_ok=True)
    _git(["worktree", "add", "--detach", "--quiet", str(where), commit], top)
    try:
        if kept is not None:
            path, data, names = kept
            if data.partition(UNTRACKED_MARK)[0].strip():
                _git(["apply", "--whitespace=nowarn", str(path)], where)
            for name, _, content in (e.partition(b"\0") for e in data.split(UNTRACKED_MARK)[1:]):
                target = where / name.decode()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
    except BaseException:
        discard(where)
        raise
    return rebased(original, top, where)


def rebased(original: Original, root: Path, where: Path) -> Original:
    """``original`` with the paths its record names under ``root`` moved under ``where``:
    the experiment file, and the task's and ``pre_call``'s files."""

    def move(file: Any) -> Any:
        if isinstance(file, str) and Path(file).is_relative_to(root):
            return str(where / Path(file).relative_to(root))
        return file

    run = dict(original.run)
    experiment = part(run, "experiment")
    run["experiment"] = {**experiment, "file": move(experiment.get("file"))}
    run["task"] = {
        what: {**entry, "file": move(entry.get("file"))} if isinstance(entry, Mapping) else entry
        for what, entry in part(run, "task").items()
    }
    return attrs.evolve(original, record={**original.record, "run": run})


def discard(where: Path) -> None:
    """Remove a worktree :func:`checkout` made, and git's entry for it."""
    try:
        common = _git(["rev-parse", "--path-format=absolute", "--git-common-dir"], where)
        _git(["--git-dir", common.strip(), "worktree", "remove", "--force", str(where)], where)
    except (OSError, ReproduceError):
        shutil.rmtree(where, ignore_errors=True)
