# SPDX-License-Identifier: MIT
"""Config-as-code for the Apptainer image every rank runs in.

:class:`ImageSpec` is a frozen, validated image (``docs/containers.md``, "ImageSpec"). What
no quoting can make safe is refused here: the renderer writes the continuation lines of
``env``, ``post``, ``test`` and ``runscript`` values verbatim, at column 0.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from attrs.validators import deep_iterable, optional

from mushin_box._core.redact import is_secret_name
from mushin_box._core.targets import public
from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.dockerfile import dockerfile_fields

_DIGEST_HINT = (
    "find the digest with `docker buildx imagetools inspect {ref}` or "
    "`skopeo inspect docker://{ref}` and write it as '{ref}@sha256:<64 hex digits>'"
)

# Docker reference grammar (distribution/reference), slightly simplified.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_DOMAIN = (
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
    r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?"
)
_BASE_RE = re.compile(
    rf"^(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"@(?P<digest>sha256:[0-9a-f]{64})\Z"
)
_APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(?::[a-z0-9-]+)?=[A-Za-z0-9.+~:-]+\Z")
_PIP_HASH_RE = re.compile(r"\s+--hash[= ](sha256|sha384|sha512):([0-9a-fA-F]+)")
_PIP_REQ_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"(?:\[[A-Za-z0-9._,\s-]*\])?\s*===?\s*(?P<version>[A-Za-z0-9.+!_-]+)"
    r"\s*(?:;[^\n]*)?\Z"
)
_HASH_LEN = {"sha256": 64, "sha384": 96, "sha512": 128}
_URL_RE = re.compile(r"^(?:https?|file)://\S+\Z")
_SAFE_PATH_RE = re.compile(r"^[A-Za-z0-9._/+@=,:-]+\Z")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_LABEL_KEY_RE = re.compile(r"^[^\s#%][^\s]*\Z")
_PYTHON_RE = re.compile(r"^[A-Za-z0-9_./-]+\Z")
#: Directory inside the image that holds the pip lock / requirements the build used.
BUILD_DIR = "/opt/mushin-box-build"
# Apptainer >= 1.2 substitutes ``{{ NAME }}`` build arguments anywhere in the file
BUILD_ARG_TEMPLATE = re.compile(r"\{\{\s*\w+\s*\}\}")
#: Apptainer splits a definition into build stages at each match, before it reads sections
#: or headers; Python's ``re`` and Go's ``regexp`` agree on it (``bootſtrap:`` matches too).
STAGE_START = re.compile(r"^bootstrap:", re.IGNORECASE | re.MULTILINE)
_RESERVED_ENV_PREFIXES = ("APPTAINER", "SINGULARITY")
_Pairs = Mapping[str, str] | Iterable[tuple[str, str]]


def parse_base_reference(ref: str) -> tuple[str, str | None, str]:
    """Split ``[registry/]name[:tag]@sha256:<64 hex>`` into ``(name, tag or None, digest)``;
    a reference not pinned by digest is refused with how to find the digest.

    >>> parse_base_reference("python:3.11-slim@sha256:" + "ab" * 32)[:2]
    ('python', '3.11-slim')
    >>> parse_base_reference("python:3.11")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: base image must be pinned by digest ...
    """
    match = _BASE_RE.match(ref) if isinstance(ref, str) else None
    if match is None:
        shown = ref.split("@", 1)[0] if isinstance(ref, str) and ref else "NAME:TAG"
        raise ValueError(
            f"base image must be pinned by digest (name@sha256:<64 hex>), got {ref!r}: "
            + _DIGEST_HINT.format(ref=shown)
        )
    return match["name"], match["tag"], match["digest"]


def _check_text(value: object, where: str, *, multiline: bool = True, verbatim: bool = True) -> str:
    """Reject what no quoting can make safe in a definition file; ``verbatim=False``: text
    the renderer indents line by line (``help``), where no line can reach column 0."""
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected str, got {type(value).__qualname__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where}: {value!r} is not valid UTF-8 text") from None
    if "\x00" in value:
        raise ValueError(f"{where}: NUL bytes cannot appear in a definition file")
    if "\r" in value:
        raise ValueError(
            f"{where}: carriage returns are not allowed (Apptainer's parser drops them)"
        )
    if not multiline and "\n" in value:
        raise ValueError(f"{where}: must be a single line, got {value!r}")
    if match := BUILD_ARG_TEMPLATE.search(value):
        raise ValueError(
            f"{where}: {match.group()!r} would be replaced by Apptainer's build-argument "
            "templating (and fail the build when no such argument is defined)"
        )
    for line in value.split("\n")[1:]:
        _check_continuation(line, where, column_zero=verbatim)
    return value


def _check_continuation(line: str, where: str, *, column_zero: bool) -> None:
    """Refuse a line Apptainer's parser would read as structure, quotes or not: a stage
    start (``bootstrap:`` at column 0), a section start (a first word starting with ``%``)."""
    words = line.split()
    if words and words[0].startswith("%"):
        raise ValueError(
            f"{where}: the line {line!r} starts with '%'; Apptainer's definition parser "
            "would start a new section there, even inside quotes: reword that line"
        )
    if column_zero and STAGE_START.match(line):
        raise ValueError(
            f"{where}: the line {line!r} would start a new build stage (Apptainer splits a "
            "definition at every line that begins with 'bootstrap:', any case, even inside "
            "quotes): reword it, or start that line with another character"
        )


def _check_script_line(value: object, where: str, *, verbatim: bool = True) -> str:
    """``_check_text``, and the first line (indented when rendered) may not open a section."""
    text = _check_text(value, where, verbatim=verbatim)
    _check_continuation(text.split("\n", 1)[0], where, column_zero=False)
    return text


def _check_safe_path(value: object, where: str, *, absolute: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected str, got {type(value).__qualname__}")
    if not _SAFE_PATH_RE.match(value) or value.startswith("-"):
        raise ValueError(
            f"{where}: {value!r} must use only letters, digits and ._/+@=,:- and not start "
            "with '-' (Apptainer glob-expands %files sources and splits lines on spaces)"
        )
    if absolute and not value.startswith("/"):
        raise ValueError(f"{where}: {value!r} must be an absolute path inside the image")
    return value


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str | bytes):
        raise TypeError(f"expected a sequence of strings, got a single string {value!r}")
    return tuple(value)


def _ordered_pairs(
    value: _Pairs, what: str = "(source, destination)"
) -> tuple[tuple[str, str], ...]:
    items = list(value.items()) if isinstance(value, Mapping) else [tuple(p) for p in value]
    for pair in items:
        if len(pair) != 2:
            raise ValueError(f"expected {what} pairs, got {pair!r}")
    return tuple((a, b) for a, b in items)  # type: ignore[misc]


def _sorted_pairs(value: _Pairs) -> tuple[tuple[str, str], ...]:
    items = _ordered_pairs(value, "(key, value)")
    keys = [str(pair[0]) for pair in items]
    if dupes := sorted({k for k in keys if keys.count(k) > 1}):
        raise ValueError(f"duplicate keys: {dupes}")
    return tuple(sorted(items, key=lambda kv: str(kv[0])))


def _validate_apt(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    for pkg in value:
        if not isinstance(pkg, str) or not _APT_RE.match(pkg):
            name = pkg.split("=", 1)[0] if isinstance(pkg, str) else pkg
            raise ValueError(
                f"apt package {pkg!r} must be pinned as 'name=version' (Debian version, "
                f"e.g. from `apt-cache policy {name}` in the base image)"
            )


def _validate_pip(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    for req in value:
        _check_text(req, f"pip requirement {req!r}", multiline=False)
        hashes = _PIP_HASH_RE.findall(req)
        spec = _PIP_HASH_RE.sub("", req).strip()
        if not _PIP_REQ_RE.match(spec):
            raise ValueError(
                f"pip requirement {req!r} must pin one version with '==' "
                "(e.g. 'torch==2.13.0 --hash=sha256:<64 hex>')"
            )
        if not hashes:
            raise ValueError(
                f"pip requirement {req!r} has no --hash=sha256:...; add the hashes of the "
                "files pip may install (`pip hash FILE`, or a lock from "
                "`uv pip compile --generate-hashes`), or use pip_lock"
            )
        for algo, digest in hashes:
            if len(digest) != _HASH_LEN[algo]:
                raise ValueError(f"pip requirement {req!r}: malformed {algo} hash {digest!r}")


def _validate_url(_inst: object, attribute: Any, url: str) -> None:
    if not isinstance(url, str) or not _URL_RE.match(url):
        raise ValueError(f"{attribute.name}: {url!r} is not an http(s):// or file:// URL")


def _safe_path(where: str, *, absolute: bool = False) -> Any:
    """An attrs validator: :func:`_check_safe_path` under the name ``where``."""
    return lambda _inst, _attr, value: _check_safe_path(value, where, absolute=absolute)


def _validate_files(_inst: object, _attr: object, value: tuple[tuple[str, str], ...]) -> None:
    for src, dest in value:
        _check_safe_path(src, "files source")
        _check_safe_path(dest, "files destination", absolute=True)


def _validate_env(_inst: object, _attr: object, value: tuple[tuple[str, str], ...]) -> None:
    for name, val in value:
        if not isinstance(name, str) or not _ENV_NAME_RE.match(name):
            raise ValueError(f"env: {name!r} is not a valid variable name")
        if name.upper().startswith(_RESERVED_ENV_PREFIXES):
            raise ValueError(
                f"env: {name!r}: APPTAINER*/SINGULARITY* variables configure Apptainer "
                "itself and cannot be set from inside the image"
            )
        if is_secret_name(name):
            # %environment is baked into the image (and image.def, and the manifest's
            # definition hash): a secret there ships to everyone who can read the .sif
            raise ValueError(
                f"env: {name!r} looks like a secret, which must not be baked into the "
                "image. Fix: pass it at run time, e.g. submitit_slurm_config(image=..., "
                f"env={{{name!r}: None}}) with {name} exported in the submitting shell"
            )
        _check_text(val, f"env {name}")


def _validate_labels(_inst: object, _attr: object, value: tuple[tuple[str, str], ...]) -> None:
    for key, val in value:
        if not isinstance(key, str) or not _LABEL_KEY_RE.match(key):
            raise ValueError(
                f"label key {key!r} must be non-empty, without whitespace, and not start "
                "with '#' or '%'"
            )
        _check_text(key, f"label key {key!r}", multiline=False)
        _check_text(val, f"label {key}", multiline=False)
        if val != val.strip():
            raise ValueError(
                f"label {key}: {val!r} has leading/trailing whitespace, which Apptainer strips"
            )


def _validate_script(_inst: object, attribute: Any, value: tuple[str, ...]) -> None:
    for i, line in enumerate(value):
        _check_script_line(line, f"{attribute.name}[{i}]")


def _validate_argv(_inst: object, attribute: Any, value: tuple[str, ...]) -> None:
    for i, arg in enumerate(value):
        _check_text(arg, f"{attribute.name}[{i}]")


def _validate_help(_inst: object, _attr: object, value: str) -> None:
    _check_script_line(value, "help", verbatim=False)  # every help line is indented


def _validate_base(_inst: object, _attr: object, value: object) -> None:
    if isinstance(value, Debootstrap | LocalImage):
        return  # validated when they were built
    if not isinstance(value, str):
        raise TypeError(
            "base: expected a digest-pinned image reference (str), Debootstrap(...) or "
            f"LocalImage(...), got {type(value).__qualname__}"
        )
    parse_base_reference(value)


def _validate_python(_inst: object, _attr: object, value: str) -> None:
    if not isinstance(value, str) or not _PYTHON_RE.match(value):
        raise ValueError(f"python: {value!r} must be a command name or path")


def _validate_epoch(_inst: object, _attr: object, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(
            f"source_date_epoch: {value!r} must be Unix seconds (an int >= 0), e.g. the "
            "output of `git log -1 --format=%ct`"
        )


def _validate_include(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    if not value:
        raise ValueError(
            "project include must list what to copy (e.g. ['pyproject.toml', 'mypkg']); "
            "copying the whole directory would take .git and virtualenvs along"
        )
    for entry in value:
        _check_safe_path(entry, "project include")
        if entry.startswith("/") or ".." in entry.split("/"):
            raise ValueError(f"project include {entry!r} must be relative to src, no '..'")


def _validate_project(_inst: object, _attr: object, value: object) -> None:
    if value is not None and not isinstance(value, ProjectInstall):
        raise TypeError(f"project must be a ProjectInstall, got {type(value).__qualname__}")


@public
@attrs.frozen(kw_only=True)
class ProjectInstall:
    """The user's project, copied into the image and installed with ``pip --no-deps``.

    ``dest``: an absolute directory in the image; ``include``: the entries of ``src`` (a
    directory relative to the build context, default ``"."``) to copy, so that ``.git``,
    virtual environments and data stay out; ``build_isolation`` (default ``False``): the
    build backend comes from the pinned pip set, not an unpinned download.

    >>> ProjectInstall(dest="/opt/app", include=["pyproject.toml", "app"]).include
    ('pyproject.toml', 'app')
    """

    dest: str = attrs.field(validator=_safe_path("project dest", absolute=True))
    include: tuple[str, ...] = attrs.field(converter=_str_tuple, validator=_validate_include)
    src: str = attrs.field(default=".", validator=_safe_path("project src"))
    build_isolation: bool = attrs.field(default=False)

    def files(self) -> tuple[tuple[str, str], ...]:
        """``(source, destination)`` pairs for ``%files``."""
        src = self.src.rstrip("/") or "/"
        prefix = "" if src == "." else src + "/"
        dest = self.dest.rstrip("/")
        return tuple((prefix + e.rstrip("/"), f"{dest}/{e.rstrip('/')}") for e in self.include)


@public
@attrs.frozen(kw_only=True)
class ImageSpec:
    """A validated, immutable description of an Apptainer image.

    Fields and bases: ``docs/containers.md`` ("ImageSpec"). ``files`` pairs are copied with
    ``cp -fLr SRC DEST`` (``DEST`` created when it ends in ``/``), so a directory lands
    *inside* an existing ``DEST``: write ``dir/.`` for its contents. A value unsafe in a
    definition file is a ``ValueError``; a wrong type (a string for a list) a ``TypeError``.

    >>> spec = ImageSpec(
    ...     base="python:3.11-slim-bookworm@sha256:" + "0" * 64,
    ...     env={"PYTHONUNBUFFERED": "1"},
    ...     runscript=["python"],
    ... )
    >>> from mushin_box._image.definition import render_definition
    >>> print(render_definition(spec))  # doctest: +ELLIPSIS
    Bootstrap: docker
    From: python:3.11-slim-bookworm@sha256:000...
    ...
    %environment
        export PYTHONUNBUFFERED=1
    ...
    """

    base: str | Debootstrap | LocalImage = attrs.field(validator=_validate_base)
    apt: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, validator=_validate_apt)
    pip: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, validator=_validate_pip)
    pip_lock: str | None = attrs.field(default=None, validator=optional(_safe_path("pip_lock")))
    pip_index_url: str | None = attrs.field(default=None, validator=optional(_validate_url))
    pip_extra_index_urls: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=deep_iterable(_validate_url)
    )
    files: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_ordered_pairs, validator=_validate_files
    )
    env: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_sorted_pairs, validator=_validate_env
    )
    labels: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=_sorted_pairs, validator=_validate_labels
    )
    post: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_validate_script
    )
    project: ProjectInstall | None = attrs.field(default=None, validator=_validate_project)
    runscript: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_validate_argv
    )
    runscript_args: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_validate_argv
    )
    test: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_validate_script
    )
    help: str = attrs.field(default="", validator=_validate_help)
    python: str = attrs.field(default="python", validator=_validate_python)
    venv: str | None = attrs.field(
        default=None, validator=optional(_safe_path("venv", absolute=True))
    )
    source_date_epoch: int | None = attrs.field(default=None, validator=_validate_epoch)

    @property
    def base_digest(self) -> str | None:
        """``sha256:<hex>`` of a Docker base; ``None`` for a Debootstrap or LocalImage base."""
        return parse_base_reference(self.base)[2] if isinstance(self.base, str) else None

    @property
    def base_image(self) -> str:
        """The base as the build manifest records it: the Docker reference, or
        ``"debootstrap SUITE MIRROR"`` / ``"localimage PATH"``."""
        return self.base if isinstance(self.base, str) else self.base.reference

    def all_files(self) -> tuple[tuple[str, str], ...]:
        """Every ``%files`` pair in render order: lock, ``files``, project."""
        lock = [] if self.pip_lock is None else [(self.pip_lock, f"{BUILD_DIR}/requirements.lock")]
        project = () if self.project is None else self.project.files()
        return (*lock, *self.files, *project)

    @classmethod
    def from_dockerfile(cls, path: str | os.PathLike[str], **overrides: Any) -> ImageSpec:
        """Start an ImageSpec from a Dockerfile, parsed with spython's ``DockerParser``.

        What is converted and what is refused: ``docs/containers.md``, "Starting from a
        Dockerfile". ``overrides`` replace converted fields (e.g. ``base=...@sha256:...``
        when ``FROM`` is not pinned). Relative ``COPY`` sources stay relative: build with the
        Dockerfile's directory as the context.
        """
        fields = {**dockerfile_fields(path), **overrides}
        try:
            return cls(**fields)
        except ValueError as exc:
            raise ValueError(f"{os.fspath(path)}: {exc}") from exc
