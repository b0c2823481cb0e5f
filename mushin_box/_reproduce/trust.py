# SPDX-License-Identifier: MIT
"""The cell's code: what ``reproduce`` checks before it imports anything a record names,
and the code checked out beside the user's tree (``reproduce --worktree``).

Anyone who can write to a sweep can name any file as the task's, with a matching
fingerprint, and an import runs module code (with the user's secrets). So every user file
the re-run would import must first lie in the **experiment's root** (its git repository,
else its directory), be the user's **own** (as ``ssh`` treats its keys), be at the
recorded **commit** and have the recorded **fingerprint** (``allow_dirty`` lets these two
through). A refusal names no fingerprint: it would let a forged record pass.

``--worktree`` checks the cell's commit and kept code out in the re-run's sweep (shared
by every rank), leaving the user's tree alone; every check still applies.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import code_patch_file
from mushin_box._core.procs import git
from mushin_box._core.safeio import UnsafeFileError, inside, read_bounded
from mushin_box._core.userfile import owner_problem
from mushin_box._provenance.patch import PATCH_LIMIT
from mushin_box._provenance.record import UNTRACKED_MARK, git_root, git_state
from mushin_box._provenance.task import MAIN_NAMES
from mushin_box._reproduce.checks import (
    FINGERPRINT_DIFFERS,
    Original,
    ReproduceError,
    code_differs,
    git_problems,
    part,
)
from mushin_box._sweep.usercode import code_identity, is_user_file, module_file

#: writes each untracked file of a kept diff (``PATCH ROOT``)
_WRITE_UNTRACKED = (
    "import sys, pathlib; r = pathlib.Path(sys.argv[2]); "
    f"d = pathlib.Path(sys.argv[1]).read_bytes().split({UNTRACKED_MARK!r})[1:]; "
    "[(r.joinpath(n.decode()).parent.mkdir(parents=True, exist_ok=True), "
    'r.joinpath(n.decode()).write_bytes(c)) for n, _, c in (e.partition(b"\\0") for e in d)]'
)
HEX = re.compile(r"[0-9a-f]{40,64}")


def _experiment_file(original: Original) -> Path | None:
    """The recorded experiment file, else (an older record) the task's user file, or None."""
    file = part(original.run, "experiment").get("file")
    if file is None:
        return next(iter(_entry_files(original)), None)
    if not isinstance(file, str) or not os.path.isabs(file):
        raise ReproduceError(
            f"{original.cell_dir.name}: its record's experiment file (run.experiment.file) "
            f"is {file!r}, not a path; restore the record, or run the cell again"
        )
    path = Path(file)
    if not path.is_file():
        raise ReproduceError(
            f"the cell's experiment file {file} is not there; check out its repository "
            "at that path, or reproduce on the machine that ran it"
        )
    return path.resolve()


def _stand_in(entry: Any, experiment: Path | None) -> Any:
    """The task (or ``pre_call``) as a stand-in with the recorded names: the user modules it
    reaches are then fingerprinted without an import (a script's ``__main__``: its stem)."""
    if not isinstance(entry, Mapping):
        return None
    module = str(entry.get("module"))
    if module in MAIN_NAMES:
        file = entry.get("file")
        module = Path(str(file)).stem if file else getattr(experiment, "stem", module)
    return types.SimpleNamespace(__module__=module, __qualname__=str(entry.get("qualname")))


def _entry_files(original: Original) -> Iterable[Path]:
    """The recorded files of the task and ``pre_call`` the import would read: only where
    the module name leads nowhere (a script, a folder not on the path); never the kit's."""
    located = part(original.run, "task")
    for what in ("task", "pre_call"):
        entry = located.get(what)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("file"), str):
            continue
        module = str(entry.get("module"))
        if module not in MAIN_NAMES and (
            module.partition(".")[0] == "mushin_box" or module_file(module) is not None
        ):
            continue
        file = Path(entry["file"]).resolve()
        if is_user_file(file):
            yield file


def check_sources(
    original: Original, config: Any, *, allow_dirty: bool
) -> tuple[bool, tuple[str, ...]]:
    """Check the files a re-run would import, importing none (module doc): ``(the same
    fingerprint, what differs at another commit whose imported files are the cell's)``."""
    experiment = _experiment_file(original)
    top = git_root(experiment) if experiment is not None else None
    root = Path(top).resolve() if top else getattr(experiment, "parent", None)
    # the experiment's directory first on sys.path, as on the ranks': found elsewhere, refused
    if experiment is not None and str(experiment.parent) not in sys.path:
        sys.path.insert(0, str(experiment.parent))
    located = part(original.run, "task")
    task, pre_call = (_stand_in(located.get(w), experiment) for w in ("task", "pre_call"))
    identity = code_identity(task, config=config, extra=(pre_call,))
    files = {*([experiment] if experiment else []), *_entry_files(original)}
    files |= {Path(p).resolve() for p in identity.files}
    for file in sorted(files):
        if root is not None and not file.is_relative_to(root):
            raise ReproduceError(
                f"the cell's record would import {file}, outside its experiment's repository "
                f"{root}; a record that names code elsewhere is not reproduced (was the "
                "sweep directory edited?)"
            )
        problem = owner_problem(file)
        if problem:
            raise ReproduceError(
                f"{file} {problem}: reproduce imports only your own files, so that a record "
                "cannot make it run someone else's code"
            )
    moved = _check_commit(original, experiment, files) if experiment and not allow_dirty else ()
    same = identity.fingerprint == (original.repro.get("code") or {}).get("task_sha256")
    if not same and not allow_dirty:
        raise code_differs([FINGERPRINT_DIFFERS])
    return same, moved


def _check_commit(original: Original, experiment: Path, files: set[Path]) -> tuple[str, ...]:
    """Refuse a checkout whose code is not the cell's; another commit whose imported files
    are the clean cell's commit blobs is not refused: what differs is returned."""
    recorded = (original.repro.get("code") or {}).get("git")
    problems = git_problems(recorded, git_state(experiment, include=files))
    if not isinstance(recorded, Mapping) or recorded.get("diff_sha256") is not None:
        if problems:  # the cell ran with uncommitted changes: only that tree is its code
            missing, ways_back = kept_code(original, recorded, experiment)
            raise code_differs([*problems, *missing], ways_back)
        return ()
    commit = str(recorded.get("commit"))
    unlike = _not_committed(commit, experiment, files)
    if unlike:
        top = git_root(experiment) or experiment.parent
        switch = f"git -C {shlex.quote(str(top))} switch --detach {commit}"
        way_back = (
            "to run the cell's code from its commit, leaving this tree as it is, pass "
            f"{{worktree}}; or check the commit out: {switch}"
        )
        raise code_differs(problems or unlike, [way_back] if problems else [])
    return tuple(problems)


def kept_code(original: Original, recorded: Any, experiment: Path) -> tuple[list[str], list[str]]:
    """(why there is no way back, the ways back) to the uncommitted code a cell ran, from
    its sweep's copy: ``--worktree``, or the shell commands that rebuild that tree."""
    sha, commit = recorded.get("diff_sha256"), str(recorded.get("commit"))
    if not isinstance(sha, str) or not HEX.fullmatch(sha) or not HEX.fullmatch(commit):
        return [], []
    try:
        path, _, names = kept_patch(original, sha)
    except ReproduceError as exc:
        return [str(exc)], []
    top = shlex.quote(str(git_root(experiment) or experiment.parent))
    steps = [
        f"git -C {top} switch --detach {commit}",
        f"git -C {top} apply {shlex.quote(str(path))}",
    ]
    if names:  # files git did not track: git apply skips their entries
        steps.append(
            f"{shlex.quote(sys.executable)} -c {shlex.quote(_WRITE_UNTRACKED)} "
            f"{shlex.quote(str(path))} {top}"
        )
    return [], [
        "to run the cell's code from its sweep's copy, leaving this tree as it is, pass "
        f"{{worktree}}; or, on a clean tree: {' && '.join(steps)}"
    ]


def _not_committed(commit: str, experiment: Path, files: set[Path]) -> list[str]:
    """The refusal of ``files`` that are not the commit's blobs (one ``git cat-file``)."""
    top = git_root(experiment)
    if not top:
        return []
    root = Path(top).resolve()
    ours = sorted(f for f in files if f.is_relative_to(root))
    asked = "".join(f"{commit}:{f.relative_to(root).as_posix()}\n" for f in ours)
    proc = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=root, input=asked.encode(), capture_output=True
    )
    out, at, differ = proc.stdout, 0, []
    for file in ours:
        header, _, rest = out[at:].partition(b"\n")
        words = header.split()
        if proc.returncode or len(words) != 3 or not words[2].isdigit():
            differ.append(str(file))  # missing from the commit: untracked or ignored
            at += len(header) + 1
            continue
        size = int(words[2])
        blob, at = rest[:size], at + len(header) + 1 + size + 1
        if blob != file.read_bytes():
            differ.append(str(file))
    if not differ:
        return []
    return [
        f"{', '.join(differ)} differ(s) from commit {commit}'s (a file git does not show: "
        "ignored, or marked unchanged); commit it, or restore the commit's"
    ]


def kept_patch(original: Original, sha: str) -> tuple[Path, bytes, list[str]]:
    """The sweep's copy of the code whose sha256 is ``sha`` (path, bytes, untracked names);
    refused when missing, of another sha256, or writing outside the repository."""
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
    # each untracked name a path git would write inside the repository: relative, no ".."
    outside = [n for n in names if not n or n.startswith("/") or ".." in n.split("/")]
    if hashlib.sha256(data).hexdigest() != sha or outside:
        raise ReproduceError(
            f"{path} is not the code the cell ran (its sha256 differs); restore it"
        )
    return path, data, names


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


def checkout(original: Original, where: Path) -> Original:
    """Check out the code ``original`` ran at ``where``; return it with its paths there."""
    recorded = part(original.repro, "code").get("git")
    commit = recorded.get("commit") if isinstance(recorded, Mapping) else None
    if not isinstance(commit, str) or not HEX.fullmatch(commit):
        raise ReproduceError(
            "the cell's code ran in no git checkout, so there is no commit to check out: "
            "drop {worktree}",
            arguments={"worktree": True},
        )
    file = part(original.run, "experiment").get("file")
    found = None
    if isinstance(file, str) and file.startswith("/"):  # a recorded path: checked first
        here = Path(file).parent  # its repository, even with the file since deleted
        while not here.is_dir() and here != here.parent:
            here = here.parent
        found = git_root(here)
    if not found:
        raise ReproduceError(
            f"no git repository holds the cell's experiment file {file} here: run this on "
            "a machine with its repository at that path"
        )
    top = Path(found).resolve()
    if git(["cat-file", "-e", f"{commit}^{{commit}}"], top, timeout=120) is None:
        raise ReproduceError(
            f"the repository {top} does not hold the cell's commit {commit}: fetch it "
            f"(git -C {top} fetch), then run this again"
        )
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
    """``original`` with the files its record names under ``root`` moved under ``where``."""

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
