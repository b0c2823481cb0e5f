# SPDX-License-Identifier: MIT
"""What ``reproduce`` checks before it imports anything a record names.

Anyone who can write to a sweep directory can name any file as the task's and set the
recorded fingerprint to match it, and importing a file to fingerprint it already runs its
module-level code (with the user's secrets in the environment). So, before the first
import, every file the re-run would import from outside the installed environment (the
task's and ``pre_call``'s modules, the config's ``_target_`` modules and the user modules
they import, found by reading the files) must:

- lie inside the **experiment's root**: the git repository holding the recorded
  experiment file (an older record: the task's file), or its directory outside git;
- be the user's **own**: owned by them (or root), writable by nobody else, as ``ssh``
  treats its keys;
- be at the recorded **commit**, with the same uncommitted changes; a cell that ran on a
  clean tree needs each file to be the commit's blob (a file git does not see, ignored or
  marked unchanged, is no part of the commit);
- have the recorded **fingerprint**, computed from their bytes.

``allow_dirty`` lets the last two through (recorded in the re-run). A refusal names no
fingerprint: written into a forged record, the one computed here would make it pass. The
fingerprint is compared again after the import; secrets go only to code whose
fingerprint is the recorded one.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mushin_box._core.userfile import owner_problem
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
from mushin_box._reproduce.worktree import HEX, kept_patch
from mushin_box._sweep.usercode import code_identity, is_user_file, module_file

#: writes each untracked file of a kept diff (``PATCH ROOT``): ``\0untracked PATH\0`` then
#: its bytes (:func:`~mushin_box._provenance.record.git_tree`)
_WRITE_UNTRACKED = (
    "import sys, pathlib; r = pathlib.Path(sys.argv[2]); "
    f"d = pathlib.Path(sys.argv[1]).read_bytes().split({UNTRACKED_MARK!r})[1:]; "
    "[(r.joinpath(n.decode()).parent.mkdir(parents=True, exist_ok=True), "
    'r.joinpath(n.decode()).write_bytes(c)) for n, _, c in (e.partition(b"\\0") for e in d)]'
)
_KIT = "mushin_box"


def _experiment_file(original: Original) -> Path | None:
    """The recorded experiment file, or, for a record older than ``run.experiment``, the
    task's own file when it is user code; None when neither is recorded."""
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


def _stand_ins(original: Original, experiment: Path | None) -> list[Any]:
    """``[task, pre_call]`` as objects that carry the recorded module and qualified names
    (None where none is recorded), so that the user modules they reach are found, and
    fingerprinted, without importing them. A task recorded as ``__main__`` (a script) is
    imported from its file as the module named after it."""
    out: list[Any] = []
    located = part(original.run, "task")
    for what in ("task", "pre_call"):
        entry = located.get(what)
        if not isinstance(entry, Mapping):
            out.append(None)
            continue
        module = str(entry.get("module"))
        if module in MAIN_NAMES:
            file = entry.get("file")
            module = Path(str(file)).stem if file else getattr(experiment, "stem", module)
        name = str(entry.get("qualname"))
        out.append(types.SimpleNamespace(__module__=module, __qualname__=name))
    return out


def _entry_files(original: Original) -> Iterable[Path]:
    """The files the record names for the task and ``pre_call`` that the import would
    read: a module found by its name is imported from where the name leads (its file is
    among the user modules, or it is installed), so its recorded file is only used when
    the name leads nowhere (a script's ``__main__``, a folder not on the path). The kit's
    own names, old paths included, always resolve in the kit."""
    located = part(original.run, "task")
    for what in ("task", "pre_call"):
        entry = located.get(what)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("file"), str):
            continue
        module = str(entry.get("module"))
        if module not in MAIN_NAMES and (
            module.partition(".")[0] == _KIT or module_file(module) is not None
        ):
            continue
        file = Path(entry["file"]).resolve()
        if is_user_file(file):
            yield file


def check_sources(
    original: Original, config: Any, *, allow_dirty: bool
) -> tuple[bool, tuple[str, ...]]:
    """Check the files a re-run of ``original`` would import, without importing any:
    ``(their fingerprint is the recorded one, what differs in a checkout at another
    commit whose imported files are the cell's)``. Puts the experiment's directory first
    on ``sys.path``, as the ranks' import path: a module found elsewhere is refused.
    """
    experiment = _experiment_file(original)
    top = git_root(experiment) if experiment is not None else None
    root = Path(top).resolve() if top else getattr(experiment, "parent", None)
    if experiment is not None and str(experiment.parent) not in sys.path:
        sys.path.insert(0, str(experiment.parent))
    task, pre_call = _stand_ins(original, experiment)
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
    """Refuse a checkout whose code is not the cell's. A cell that ran on a clean tree ran
    its commit's files: where each file the re-run imports is still that commit's blob,
    another commit checked out (or changes elsewhere) changes nothing the experiment runs,
    and the re-run goes on; what differs is returned, to be said."""
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
    the copy its sweep keeps (:func:`~mushin_box._reproduce.worktree.kept_patch`):
    ``reproduce --worktree``, or the shell commands that check out its commit on a clean
    tree, apply the diff and write the files git did not track."""
    sha = recorded.get("diff_sha256") if isinstance(recorded, Mapping) else None
    commit = str(recorded.get("commit")) if isinstance(recorded, Mapping) else ""
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
    """The files among ``files`` of the repository holding ``experiment`` whose bytes are
    not the commit's blob of them (one ``git cat-file --batch`` for all)."""
    top = git_root(experiment)
    if not top:
        return []
    root = Path(top).resolve()
    inside = sorted(f for f in files if f.is_relative_to(root))
    asked = "".join(f"{commit}:{f.relative_to(root).as_posix()}\n" for f in inside)
    proc = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=root, input=asked.encode(), capture_output=True
    )
    out, at, differ = proc.stdout, 0, []
    for file in inside:
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
