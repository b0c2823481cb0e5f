# SPDX-License-Identifier: MIT
"""The Apptainer definition file of an :class:`~mushin_box._image.spec.ImageSpec`.

:func:`render_definition` is our own renderer (spython's writer mangles labels, files and
runscripts; see ``docs/containers.md``): the same spec gives the same bytes, every value is
quoted with :func:`shlex.quote`, and what no quoting can make safe is refused when the spec
is built (:mod:`mushin_box._image.spec`).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from mushin_box._core.targets import public
from mushin_box._image.bases import Debootstrap, LocalImage
from mushin_box._image.spec import BUILD_ARG_TEMPLATE, BUILD_DIR, STAGE_START, ImageSpec

_INDENT = "    "
_q = shlex.quote


def _section(name: str, lines: Iterable[str]) -> list[str]:
    body = [_INDENT + line if line else "" for line in lines]
    return [f"%{name}", *body, ""] if body else []


def image_python(spec: ImageSpec) -> str:
    """The Python that runs in the image: the venv's when there is one."""
    return spec.python if spec.venv is None else f"{spec.venv}/bin/python"


def _pip_install(spec: ImageSpec, *args: str) -> str:
    words = [image_python(spec), "-m", "pip", "install", "--no-cache-dir"]
    if spec.pip_index_url is not None:
        words += ["--index-url", spec.pip_index_url]
    for url in spec.pip_extra_index_urls:
        words += ["--extra-index-url", url]
    return " ".join(_q(w) for w in [*words, *args])


def apt_lines(spec: ImageSpec) -> list[str]:
    """The ``%post`` lines that install ``spec.apt`` from the base's own apt sources (the
    native builder runs them for a ``LocalImage`` base only: mmdebstrap installs the rest)."""
    if not spec.apt:
        return []
    packages = " ".join(_q(p) for p in spec.apt)
    return [
        "export DEBIAN_FRONTEND=noninteractive",
        "apt-get update",
        f"apt-get install -y --no-install-recommends {packages}",
    ]


def setup_lines(spec: ImageSpec) -> list[str]:
    """The ``%post`` lines after the apt packages: the venv, pip, the project, ``post``
    (what the native builder runs in the tree, so its embedded definition is true)."""
    lines: list[str] = []
    if spec.venv is not None:
        lines.append(f"{_q(spec.python)} -m venv {_q(spec.venv)}")
    if spec.pip_lock is not None:
        lines.append(_pip_install(spec, "--require-hashes", "-r", f"{BUILD_DIR}/requirements.lock"))
    if spec.pip:
        requirements = f"{BUILD_DIR}/requirements.txt"
        lines.append(f"mkdir -p {BUILD_DIR}")
        lines.append(f"printf '%s\\n' {' '.join(_q(r) for r in spec.pip)} > {requirements}")
        lines.append(_pip_install(spec, "--require-hashes", "-r", requirements))
    if spec.project is not None:
        flags = ["--no-deps"] + ([] if spec.project.build_isolation else ["--no-build-isolation"])
        lines.append(_pip_install(spec, *flags, spec.project.dest))
    lines.extend(spec.post)
    return lines


def environment_lines(spec: ImageSpec) -> list[str]:
    """The ``%environment`` lines: the venv first on ``PATH``, then ``env``, quoted."""
    lines: list[str] = []
    if spec.venv is not None:
        lines += [
            f'export PATH={_q(spec.venv + "/bin")}:"$PATH"',
            f"export VIRTUAL_ENV={_q(spec.venv)}",
        ]
    return lines + [f"export {k}={_q(v)}" for k, v in spec.env]


def runscript_lines(spec: ImageSpec) -> list[str]:
    """The ``%runscript`` lines (none: no runscript section)."""
    if not spec.runscript and not spec.runscript_args:
        return []
    lines: list[str] = []
    if spec.runscript_args:
        defaults = " ".join(_q(a) for a in spec.runscript_args)
        lines.append(f'if [ "$#" -eq 0 ]; then set -- {defaults}; fi')
    prefix = " ".join(_q(a) for a in spec.runscript)
    lines.append(f'exec {prefix} "$@"' if prefix else 'exec "$@"')
    return lines


def _header(spec: ImageSpec) -> list[str]:
    """The header lines of ``spec.base``, keys spelled as Apptainer's docs do."""
    base = spec.base
    if isinstance(base, Debootstrap):
        return ["Bootstrap: debootstrap", f"OSVersion: {base.suite}", f"MirrorURL: {base.mirror}"]
    if isinstance(base, LocalImage):
        return ["Bootstrap: localimage", f"From: {base.path}"]
    return ["Bootstrap: docker", f"From: {base}"]


def _check_rendered(text: str) -> None:
    """Safety net against a renderer change: one build stage, the only '%' lines are our
    section headers, no templating (the spec's validators refuse each)."""
    stages = len(STAGE_START.findall(text))
    if stages != 1 or not STAGE_START.match(text):
        raise AssertionError(f"rendered text would be read as {stages} build stages")
    headers = {"%labels", "%environment", "%files", "%post", "%runscript", "%test", "%help"}
    for line in text.split("\n"):
        words = line.split()
        if words and words[0].startswith("%") and line not in headers:
            raise AssertionError(f"rendered line would start a section: {line!r}")
    if match := BUILD_ARG_TEMPLATE.search(text):
        raise AssertionError(f"rendered text contains build-arg templating {match.group()!r}")


@public
def render_definition(spec: ImageSpec) -> str:
    """Render an Apptainer definition file for ``spec``: equal specs give equal text.

    The sections, their order and indentation: ``docs/containers.md``, "Rendering".

    >>> from mushin_box._image.spec import ImageSpec
    >>> spec = ImageSpec(base="debian@sha256:" + "1" * 64, labels={"org.example.a": "b c"},
    ...                  post=["echo 'hi there'"])
    >>> print(render_definition(spec))
    Bootstrap: docker
    From: debian@sha256:1111111111111111111111111111111111111111111111111111111111111111
    # Rendered by mushin-box from an ImageSpec: edit the spec, not this file.
    <BLANKLINE>
    %labels
        org.example.a b c
    <BLANKLINE>
    %post
        set -eu
        echo 'hi there'
    <BLANKLINE>
    """
    if not isinstance(spec, ImageSpec):
        raise TypeError(f"expected an ImageSpec, got {type(spec).__qualname__}")
    out = [
        *_header(spec),
        "# Rendered by mushin-box from an ImageSpec: edit the spec, not this file.",
        "",
    ]
    out += _section("labels", (f"{k} {v}".rstrip() for k, v in spec.labels))
    out += _section("environment", environment_lines(spec))
    out += _section("files", (f"{src} {dest}" for src, dest in spec.all_files()))
    clean_apt = ["rm -rf /var/lib/apt/lists/*"] if spec.apt else []
    out += _section("post", ["set -eu", *apt_lines(spec), *clean_apt, *setup_lines(spec)])
    out += _section("runscript", runscript_lines(spec))
    out += _section("test", spec.test)
    out += _section("help", spec.help.split("\n") if spec.help else ())
    text = "\n".join(out).rstrip("\n") + "\n"
    _check_rendered(text)
    return text
