# SPDX-License-Identifier: MIT
"""The two bases of an image that need no registry: :class:`Debootstrap` and :class:`LocalImage`.

Many clusters cannot pull from Docker Hub: ``docs/containers.md`` ("ImageSpec") says what
each renders and how the build manifest pins them without a registry digest.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from mushin_box._core.targets import public
from mushin_box._image.sif import SifFormatError, read_sif_header

#: Where :class:`Debootstrap` reads the suite and mirror it was not given (apt's own files).
APT_SOURCES = "/etc/apt"
_SUITE_RE = re.compile(r"^[a-z][a-z0-9.+-]{0,63}\Z")
# deb [arch=amd64 signed-by=...] URI SUITE COMPONENT...
_DEB_LINE = re.compile(r"deb[ \t]+(?:\[[^\]]*\][ \t]*)?(\S+)[ \t]+(\S+)")
_MIRROR_RE = re.compile(r"^(?:https?|file)://[A-Za-z0-9._~:/?\[\]@!$&()*+,;=%-]+\Z")
_SHAPES = {
    "suite": (
        _SUITE_RE,
        "is not a Debian suite or codename (lowercase, e.g. 'bookworm', "
        "'trixie', 'stable'): give the name debootstrap knows",
    ),
    "mirror": (
        _MIRROR_RE,
        "must be an http(s):// or file:// URL without spaces, quotes or "
        "braces, e.g. 'http://deb.debian.org/debian'",
    ),
}


def check_header_value(value: object, where: str) -> str:
    """Refuse what Apptainer's header parser would change in a ``Key: value`` line: it cuts
    at ``#``, trims, joins a line ending in ``\\`` with the next, and expands ``{{ }}``."""
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected str, got {type(value).__qualname__}")
    bad = [c for c in value if ord(c) < 32 or ord(c) == 127]
    if not value or bad or "#" in value or value != value.strip() or value.endswith("\\"):
        raise ValueError(
            f"{where}: {value!r} cannot be written as a definition header value (no '#', "
            "control characters, surrounding spaces or trailing backslash): rename or move it"
        )
    if "{{" in value or "}}" in value:
        raise ValueError(f"{where}: {value!r} contains build-argument braces '{{{{ }}}}'")
    return value


def _one_line_sources(text: str) -> Iterator[tuple[str, str]]:
    """``(uri, suite)`` of each ``deb`` line (not ``deb-src``) of a one-line-style apt file."""
    for raw in text.splitlines():
        if found := _DEB_LINE.match(raw.split("#", 1)[0].strip()):
            yield found[1], found[2]


def _deb822_sources(text: str) -> Iterator[tuple[str, str]]:
    """``(uri, suite)`` pairs of the enabled ``Types: deb`` stanzas of a ``.sources`` file;
    ``#`` comments and lines that are no field are skipped, not the stanza's other fields."""
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for raw in stanza.splitlines():
            if raw[:1] in (" ", "\t") and key:  # a folded continuation line
                fields[key] += " " + raw
            elif ":" in raw and not raw.startswith("#"):
                key, _, value = raw.partition(":")
                key = key.strip().lower()
                fields[key] = value
        enabled = fields.get("enabled", "yes").strip().lower() != "no"
        if enabled and "deb" in fields.get("types", "").split():
            for uri in fields.get("uris", "").split()[:1]:
                for suite in fields.get("suites", "").split():
                    yield uri, suite


def apt_source(root: str | os.PathLike[str] = APT_SOURCES) -> tuple[str, str]:
    """The Debian mirror and release suite this machine's apt installs from: the first
    ``deb`` entry, in apt's order, of a release (not ``bookworm-security``) from an
    ``http(s)://`` or ``file://`` URI; none is a ``ValueError`` saying what to pass.

    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "sources.list").write_text(
    ...     "deb [arch=amd64] http://mirror.example/debian bookworm main # local\\n"
    ...     "deb http://security.debian.org/debian-security bookworm-security main\\n")
    >>> apt_source(root)
    ('http://mirror.example/debian', 'bookworm')
    """
    base = Path(root)
    files = [base / "sources.list"]
    listing = base / "sources.list.d"
    if listing.is_dir():
        files += sorted(p for p in listing.iterdir() if p.suffix in (".list", ".sources"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        entries = _deb822_sources(text) if path.suffix == ".sources" else _one_line_sources(text)
        for uri, suite in entries:
            if _SUITE_RE.match(suite) and "-" not in suite and _MIRROR_RE.match(uri):
                return uri, suite
    raise ValueError(
        f"no Debian release suite found in the apt sources under {base} (sources.list, "
        "sources.list.d/): give them, e.g. Debootstrap(suite='bookworm', "
        "mirror='http://deb.debian.org/debian')"
    )


def _check_shape(field: str, value: object) -> str:
    check_header_value(value, f"Debootstrap {field}")
    pattern, rule = _SHAPES[field]
    if not pattern.match(str(value)):
        raise ValueError(f"Debootstrap {field} {value!r} {rule}")
    return str(value)


@public
@attrs.frozen(kw_only=True)
class Debootstrap:
    """A Debian base built by ``debootstrap`` from a mirror: no container registry needed.

    Apptainer's build runs ``debootstrap`` on the build host (root or ``--fakeroot``). The
    result has no Python: install it with ``apt`` (e.g. ``python3=<version>``) and set
    ``python="python3"``. A ``suite`` or ``mirror`` not given is this machine's
    (:func:`apt_source`), read when the object is built.

    >>> Debootstrap(suite="bookworm", mirror="http://deb.debian.org/debian").reference
    'debootstrap bookworm http://deb.debian.org/debian'
    """

    suite: str | None = None
    mirror: str | None = None

    def __attrs_post_init__(self) -> None:
        suite, mirror = self.suite, self.mirror
        if suite is None or mirror is None:  # read once, here: the spec keeps the values
            host_mirror, host_suite = apt_source(APT_SOURCES)
            suite = host_suite if suite is None else suite
            mirror = host_mirror if mirror is None else mirror
        object.__setattr__(self, "suite", _check_shape("suite", suite))
        object.__setattr__(self, "mirror", _check_shape("mirror", mirror))

    @property
    def reference(self) -> str:
        """``"debootstrap SUITE MIRROR"``: the base as the build manifest records it."""
        return f"debootstrap {self.suite} {self.mirror}"


def _absolute_path(value: object) -> str:
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"LocalImage path: expected a path, got {type(value).__qualname__}")
    return os.path.abspath(os.path.expanduser(os.fspath(value)))


def _validate_local_image(_inst: object, _attr: object, value: str) -> None:
    check_header_value(value, "LocalImage path")
    path = Path(value)
    if path.is_dir():
        return  # a sandbox (`apptainer build --sandbox`)
    if not path.exists():
        raise ValueError(
            f"LocalImage path {value} does not exist: build the base first (e.g. `mushin-box "
            "build BASE_SPEC -o base.sif`) or point path= at an existing .sif"
        )
    try:
        read_sif_header(path)
    except (SifFormatError, OSError) as error:
        detail = error.text if isinstance(error, SifFormatError) else str(error)
        raise ValueError(
            f"LocalImage path {value} is neither a SIF image ({detail}) nor a sandbox "
            "directory: point path= at a .sif or a directory from `apptainer build --sandbox`"
        ) from None


@public
@attrs.frozen(kw_only=True)
class LocalImage:
    """An existing image on this machine as the base: ``Bootstrap: localimage``.

    A heavy base SIF built once under a thin project layer, or a site without registry
    access. ``path``, a SIF file or a sandbox directory, is made absolute (``~`` expanded)
    when the object is built: Apptainer would resolve it against the build context.

    >>> import os
    >>> LocalImage(path=os.curdir).path == os.path.abspath(os.curdir)  # a sandbox dir
    True
    """

    path: str = attrs.field(converter=_absolute_path, validator=_validate_local_image)

    @property
    def reference(self) -> str:
        """``"localimage PATH"``: the base as the build manifest records it."""
        return f"localimage {self.path}"
