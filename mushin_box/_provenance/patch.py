# SPDX-License-Identifier: MIT
"""The uncommitted code of a dirty launch, kept in the sweep so that it can be run again.

A cell records only the sha256 of a dirty tree's diff, which no checkout gives back once
the tree changes; so the launch writes the diff into the sweep, named by its hash,
owner-only, and the cells point at it (``run.experiment.patch``). It is kept only under
:data:`PATCH_LIMIT` bytes (more is data, and fills the quota) and with no secret
(:mod:`mushin_box._core.redact`: a secret file's name, or text the redaction changes);
the reason names the file, never the value.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from mushin_box._core.layout import code_patch_file
from mushin_box._core.redact import is_secret_file, redact_text
from mushin_box._core.safeio import read_bounded
from mushin_box._core.sidecars import write_bytes_atomic
from mushin_box._provenance.record import UNTRACKED_MARK, git_tree

#: the largest diff kept: code changes are far smaller
PATCH_LIMIT = 16 * 2**20
_HEADER = re.compile(rb"^diff --git a/(.*) b/(.*)$", re.MULTILINE)


class CodePatch(NamedTuple):
    """A tree's uncommitted diff, and why it is not kept (None: it is)."""

    sha256: str
    data: bytes
    refused: str | None


def patch_files(data: bytes) -> list[tuple[str, bytes]]:
    """``(path, bytes)`` of each file the diff touches: tracked, then untracked."""
    tracked, *untracked = data.split(UNTRACKED_MARK)
    heads = list(_HEADER.finditer(tracked))
    out = [
        (head.group(2).decode("utf-8", "replace"), tracked[head.start() : end])
        for head, end in zip(heads, [h.start() for h in heads[1:]] + [len(tracked)], strict=True)
    ]
    for entry in untracked:
        name, _, content = entry.partition(b"\0")
        out.append((name.decode("utf-8", "replace"), content))
    return out


def _refusal(data: bytes) -> str | None:
    """Why ``data`` is not kept, naming no secret value; None: it is kept."""
    if len(data) > PATCH_LIMIT:
        return (
            f"they are {len(data) / 2**20:.1f} MiB, over the {PATCH_LIMIT // 2**20} MiB kept "
            "(data or generated files?)"
        )
    for name, part in patch_files(data):
        if is_secret_file(name):
            return f"they change {name}, whose name is a secret file's"
        text = part.decode("utf-8", "replace")
        if redact_text(text) != text:
            return f"the changes to {name} hold a value the secret rule hides"
    return None


def code_patch(path: Path, include: Iterable[str | Path] = ()) -> CodePatch | None:
    """The uncommitted diff of the repository holding ``path``; None when clean or no git."""
    tree = git_tree(path, include=include)
    if tree is None or not tree[2]:
        return None
    data = tree[2]
    return CodePatch(hashlib.sha256(data).hexdigest(), data, _refusal(data))


def keep_patch(
    root: Path, experiment: Mapping[str, Any] | None, include: Iterable[str | Path] = ()
) -> dict[str, Any] | None:
    """``experiment``, with ``patch`` where its dirty diff was written in the sweep ``root``."""
    if experiment is None:
        return None
    git = experiment.get("git")
    recorded = git.get("diff_sha256") if isinstance(git, Mapping) else None
    if not recorded:
        return dict(experiment)
    file = experiment.get("file")
    patch = code_patch(Path(file) if file else Path.cwd(), include)
    if patch is None or patch.refused or patch.sha256 != recorded:
        return dict(experiment)
    name = code_patch_file(patch.sha256)
    target = root / name
    if any(part.is_symlink() for part in (target.parent.parent, target.parent)):
        return dict(experiment)  # the sweep is shared: a link may lead out of it
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # an owner-only file of these bytes: nothing rewritten
        if stat.S_IMODE(target.lstat().st_mode) == 0o600:  # read_bounded refuses a link
            if read_bounded(target, PATCH_LIMIT) == patch.data:
                return {**experiment, "patch": name}
    write_bytes_atomic(target, patch.data, mode=0o600)  # a rename: replaces a link, too
    return {**experiment, "patch": name}
