# SPDX-License-Identifier: MIT
"""``reproduce --rebuild-image``: the cell's image rebuilt from the recipe its record holds.

A native build of one recipe gives the same bytes. The recipe is in ``run.image``
(``backend``, ``spec``, ``context_commit``, ``context_dir``); the spec is built from a
shared clone of that commit, and the image kept only when its sha256 is the recorded one.
Every refusal that can comes before the build.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.procs import git
from mushin_box._core.userfile import import_file
from mushin_box._image.build import build_image, manifest_path
from mushin_box._image.spec import ImageSpec
from mushin_box._provenance.record import git_root
from mushin_box._reproduce.checks import Original, ReproduceError, part
from mushin_box._reproduce.trust import HEX

_REFUGE = "pass {image}, a copy of the image the cell ran in"


@attrs.frozen
class Recipe:
    """What to rebuild, the sha256 it must have, and where the image goes."""

    spec: str
    commit: str
    repository: Path
    sha256: str
    path: Path
    context_dir: str = "."


def _refuse(why: str) -> ReproduceError:
    return ReproduceError(f"{why}; {_REFUGE}", arguments={"image": "SIF"})


def _destination(recorded: str | None, sha256: str) -> Path:
    """The recorded path when it is free and writable, else a name of its own here."""
    if recorded:
        path = Path(recorded)
        if not path.exists() and os.access(path.parent, os.W_OK | os.X_OK):
            return path
    stem = Path(recorded).stem if recorded else "image"
    return Path.cwd() / f"{stem}-{sha256[:12]}.sif"


def image_recipe(original: Original) -> Recipe:
    """The recipe of the cell's image, checked: everything but the build itself."""
    identity = original.repro.get("image")
    want = identity.get("sif_sha256") if isinstance(identity, dict) else None
    if not isinstance(want, str):
        raise ReproduceError(
            "the cell ran in no image whose sha256 was recorded, so there is none to "
            "rebuild: drop {rebuild_image}",
            arguments={"rebuild_image": True},
        )
    located = part(original.run, "image")
    backend, spec, commit = (located.get(k) for k in ("backend", "spec", "context_commit"))
    if backend not in (None, "native"):
        raise _refuse(
            f"the cell's image was built by the {backend} backend, whose builds differ byte "
            "for byte: only a native build (mushin-box build --backend native) can be rebuilt"
        )
    if backend is None or spec is None:
        raise _refuse(
            "the cell's record holds no recipe of its image (run.image.spec): it was built "
            "before build manifests recorded one, or elsewhere"
        )
    if isinstance(commit, str) and not HEX.fullmatch(commit):
        raise _refuse(f"the cell's record names the image's commit {commit!r}, not a git commit")
    if not isinstance(commit, str) or not isinstance(spec, str):
        raise _refuse(
            "the cell's image was built from a recipe with uncommitted inputs (its spec, "
            "%files or lock): no commit holds it, so it cannot be rebuilt"
        )
    target = spec.rpartition(":")[0] or spec
    if not target.endswith(".py") or Path(target).is_absolute() or ".." in Path(target).parts:
        raise _refuse(
            f"the cell's image was built from the spec {spec}, which names no file of its "
            "build context"
        )
    context = located.get("context_dir") or "."
    if not isinstance(context, str) or Path(context).is_absolute() or ".." in Path(context).parts:
        raise _refuse(
            f"the cell's record names the image's build context {context!r}, which is no "
            "directory of a repository"
        )
    here = [git_root(Path.cwd()), git_root(Path(str(part(original.run, "experiment").get("file"))))]
    probe = ["cat-file", "-e", f"{commit}^{{commit}}"]
    found = next((r for r in here if r and git(probe, Path(r)) is not None), None)
    if found is None:
        where = ", ".join(dict.fromkeys(r for r in here if r)) or "none here"
        raise ReproduceError(
            f"the cell's image was built from commit {commit}, which no repository here "
            f"holds ({where}): run this in a clone that has it (git fetch)"
        )
    path = located.get("path")
    dest = _destination(path if isinstance(path, str) else None, want)
    return Recipe(spec, commit, Path(found), want, dest, context)


def rebuild_image(recipe: Recipe, *, build: Callable[..., Any] = build_image) -> Path:
    """Build ``recipe`` into ``recipe.path`` if of the recorded sha256; else keep nothing."""
    target, _, attr = recipe.spec.rpartition(":")
    target, attr = (target, attr) if target else (recipe.spec, "IMAGE")
    dest = recipe.path
    with tempfile.TemporaryDirectory(prefix=".mushin-rebuild-") as source:
        clone = ["git", "clone", "-q", "--shared", "--no-checkout", str(recipe.repository)]
        checkout = ["git", "-c", "advice.detachedHead=false", "checkout", "-q", recipe.commit]
        for argv, cwd in ((clone + [source], None), (checkout, source)):
            done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
            if done.returncode:
                why = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise ReproduceError(
                    f"`{' '.join(argv[:3])}` of commit {recipe.commit} from "
                    f"{recipe.repository} failed: {why}"
                )
        context = Path(source) / recipe.context_dir
        file, name = context / target, f"_mushin_rebuild_{Path(target).stem}"
        try:
            module = import_file(file, name=name, on_path=False, keep=False)
        except Exception as exc:  # the recipe's own code: one line, what it raised
            raise ReproduceError(f"the image's spec {file} does not load: {exc}") from None
        spec = getattr(module, attr, None)
        if not isinstance(spec, ImageSpec):
            raise ReproduceError(f"the image's spec {file} has no ImageSpec named {attr}")
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}.rebuild-", dir=dest.parent) as tmp:
            out = Path(tmp) / dest.name
            ref = f"{file}:{attr}"
            manifest = build(spec, out, context=context, backend="native", spec_ref=ref)
            if manifest.sif_sha256 != recipe.sha256:
                raise ReproduceError(
                    f"the image rebuilt from {recipe.spec} at commit {recipe.commit} has sha256 "
                    f"{manifest.sif_sha256}, but the cell ran in sha256 {recipe.sha256} (the "
                    "mirror or a package moved?): nothing was kept; " + _REFUGE,
                    arguments={"image": "SIF"},
                )
            for made in (out.with_suffix(".def"), out, manifest_path(out)):
                if made.exists():
                    os.replace(made, dest.parent / made.name)
    return dest
