# SPDX-License-Identifier: MIT
"""Start an :class:`~mushin_box._image.spec.ImageSpec` from a user's Dockerfile.

The Dockerfile is tokenized by spython's ``DockerParser`` (0.3.14, the optional
``dockerfile`` extra); where its output is wrong, it is fixed up or refused here, never
passed on silently: ``docs/containers.md``, "Starting from a Dockerfile".
"""

from __future__ import annotations

import json
import os
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.targets import public

_INSTRUCTIONS = (
    "from|run|cmd|label|maintainer|expose|env|add|copy|entrypoint|volume|user|workdir"
    "|arg|onbuild|stopsignal|healthcheck|shell"
)
_LOWERCASE_RE = re.compile(rf"^\s*({_INSTRUCTIONS})\s", re.ASCII)
_FROM_RE = re.compile(r"^\s*FROM\s", re.IGNORECASE)
_ADD_RE = re.compile(r"^\s*ADD\s+(?:--\S+\s+)*(?P<args>.*)$", re.IGNORECASE)
_ARCHIVE_RE = re.compile(r"\.(?:tar|tgz|tar\.gz|tar\.bz2|tbz2|tar\.xz|txz|tar\.zst)$")
_DROPPED_RE = re.compile(r"^(USER|EXPOSE|VOLUME|HEALTHCHECK|STOPSIGNAL|MAINTAINER)\b")
_REFUSED_RE = re.compile(r"^(SHELL|ONBUILD)\b")


@public
class DockerfileError(MushinBoxError, ValueError):
    """The Dockerfile uses something that cannot be converted faithfully."""


class DockerfileConversionWarning(UserWarning):
    """An instruction without an Apptainer equivalent was dropped."""


def _precheck(text: str, where: str) -> None:
    lines: list[str] = []  # those that start an instruction (not continuations or comments)
    continued = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):  # a comment continues nothing
            if not continued:
                lines.append(line)
            continued = stripped.endswith("\\")
    for line in lines:
        if _LOWERCASE_RE.match(line):
            raise DockerfileError(
                f"{where}: lowercase instruction {line.strip()!r}: spython 0.3.14 keeps the "
                "keyword in the command; write instructions in upper case"
            )
    if sum(1 for line in lines if _FROM_RE.match(line)) > 1:
        raise DockerfileError(
            f"{where}: multi-stage Dockerfiles are not supported (spython 0.3.14 merges an "
            "unnamed stage into the previous one); build the final stage's inputs first"
        )
    for line in lines:
        if m := _ADD_RE.match(line):
            args = m["args"].strip()
            try:
                words = json.loads(args) if args.startswith("[") else args.split()
            except json.JSONDecodeError:
                words = args.split()
            sources = [str(w) for w in words[:-1]]
            if any(re.match(r"^[a-z]+://", s) for s in sources):
                raise DockerfileError(
                    f"{where}: {line.strip()!r}: remote ADD is not reproducible; download the "
                    "file with a pinned hash before the build and COPY it"
                )
            if any(_ARCHIVE_RE.search(s) for s in sources):
                raise DockerfileError(
                    f"{where}: {line.strip()!r}: spython 0.3.14 turns ADD of an archive into "
                    "`tar -zvf` (no -x); use COPY plus `RUN tar -xf ...`"
                )


def _env_pairs(environ: list[str], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in environ:
        name, sep, raw = item.partition("=")
        if not sep:
            raise DockerfileError(f"{where}: cannot read ENV item {item!r}")
        if len(raw) >= 2 and raw[0] == raw[-1] == "'":
            value = raw[1:-1]
        elif "$" in raw:
            raise DockerfileError(
                f"{where}: ENV {name}={raw}: values that reference variables are not "
                "supported (ImageSpec env values are literal); write the resolved value"
            )
        else:
            words = shlex.split(raw)
            if len(words) > 1:
                raise DockerfileError(f"{where}: cannot read ENV value {raw!r}")
            value = words[0] if words else ""
        out[name] = value
    return out


def _label_pairs(labels: list[Any], where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in labels:
        text = " ".join(item) if isinstance(item, list | tuple) else str(item)
        for word in shlex.split(text):
            key, sep, value = word.partition("=")
            if not sep:
                raise DockerfileError(
                    f"{where}: LABEL {text!r}: use the key=value form (legacy 'LABEL k v' "
                    "is not supported)"
                )
            out[key] = value
    return out


def _files(pairs: list[Any], root: Path, where: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for src, dest in pairs:
        src, dest = str(src), str(dest)
        if src.startswith("--"):
            raise DockerfileError(
                f"{where}: COPY/ADD flag {src!r} is not supported (spython 0.3.14 takes it "
                "for a source path); drop it and fix ownership in a RUN step if needed"
            )
        if not dest.startswith("/"):
            raise DockerfileError(
                f"{where}: COPY destination {dest!r} must be absolute (WORKDIR-relative "
                "destinations are not converted)"
            )
        if (root / src).is_dir():  # Docker copies dir's contents, dotfiles too: `dir/.`;
            # the trailing "/" makes Apptainer create DEST, as Docker does
            src, dest = (src.rstrip("/") or ".") + "/.", dest.rstrip("/") + "/"
        out.append((src, dest))
    return out


def _argv(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return ("/bin/sh", "-c", str(value))


def _post(install: list[str], environ: list[str], env: dict[str, str], where: str) -> list[str]:
    env_items = set(environ)
    out: list[str] = []
    dropped: list[str] = []
    for raw in install:
        line = raw.rstrip("\n")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if line in env_items:
            name = line.partition("=")[0]
            out.append(f"export {name}={shlex.quote(env[name])}")
            continue
        if _DROPPED_RE.match(stripped):
            dropped.append(stripped)
            continue
        if _REFUSED_RE.match(stripped):
            raise DockerfileError(f"{where}: {stripped!r} has no Apptainer equivalent")
        if stripped.startswith("<<"):
            raise DockerfileError(
                f"{where}: RUN heredocs are not supported (spython 0.3.14 splits them); "
                "use a script file and COPY it"
            )
        if stripped.startswith("["):
            try:
                words = json.loads(stripped)
            except json.JSONDecodeError:
                words = None
            if isinstance(words, list) and all(isinstance(w, str) for w in words):
                line = shlex.join(words)
        out.append(line)
    if dropped:
        warnings.warn(
            f"{where}: dropped instructions without an Apptainer equivalent: {dropped}",
            DockerfileConversionWarning,
            stacklevel=3,
        )
    return out


def dockerfile_fields(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The :class:`~mushin_box._image.spec.ImageSpec` fields of a single-stage Dockerfile;
    what would not convert faithfully is a :class:`DockerfileError`."""
    try:  # imported here, not at the top: spython is needed by this function only
        from spython.main.parse.parsers import DockerParser  # pyright: ignore
    except ImportError as exc:
        raise ImportError(
            "ImageSpec.from_dockerfile needs spython, an optional dependency: "
            "pip install 'mushin-box[dockerfile]'"
        ) from exc
    p = Path(path)
    where = str(p)
    _precheck(p.read_text(encoding="utf-8"), where)
    try:
        parser = DockerParser(str(p))
    except (IndexError, KeyError, ValueError) as exc:
        raise DockerfileError(
            f"{where}: spython could not parse it ({type(exc).__name__}: {exc}). Known "
            "spython 0.3.14 bugs: `ENV KEY value with spaces` and `ENV K=a\\ b` crash its "
            'ENV parser; write ENV KEY="value with spaces"'
        ) from exc
    recipes: dict[str, Any] = dict(parser.recipe)  # pyright: ignore
    if len(recipes) != 1:
        raise DockerfileError(f"{where}: multi-stage Dockerfiles are not supported")
    (recipe,) = recipes.values()
    if recipe.layer_files:
        raise DockerfileError(f"{where}: COPY --from is not supported")
    base = str(recipe.fromHeader or "").strip()
    if base.startswith("--"):
        raise DockerfileError(
            f"{where}: FROM {base!r}: --platform is not supported (spython keeps it in the "
            "image name); pin the platform's digest instead"
        )
    env = _env_pairs(list(recipe.environ), where)
    fields: dict[str, Any] = {
        "base": base,
        "env": env,
        "labels": _label_pairs(list(recipe.labels), where),
        "files": _files(list(recipe.files), p.parent, where),
        "post": _post(list(recipe.install), list(recipe.environ), env, where),
    }
    entrypoint, cmd = recipe.entrypoint, recipe.cmd
    fields["runscript"] = _argv(entrypoint)
    shell_entrypoint = bool(entrypoint) and not isinstance(entrypoint, list | tuple)
    fields["runscript_args"] = () if shell_entrypoint else _argv(cmd)
    if recipe.workdir:
        warnings.warn(
            f"{where}: WORKDIR {recipe.workdir} only applies during the build; Apptainer "
            "starts in the host's working directory (use --pwd at launch)",
            DockerfileConversionWarning,
            stacklevel=2,
        )
    return fields
