# SPDX-License-Identifier: MIT
"""Pre-flight of a rank image, before anything is submitted: the image exists and is a SIF,
its sha256 matches its build manifest, and its Python major.minor equals the submitting one
(the job is pickled). The report carries the image's whole identity
(:class:`ImageIdentity`: digest, SIF UUID, definition and base digests from the manifest,
the submit host's Apptainer version), which the env file hands to every rank."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from mushin_box._container.launchspec import ImageIdentity
from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import IMAGE_RECIPE_ENV
from mushin_box._core.targets import public
from mushin_box._image.build import Manifest, manifest_path, read_manifest
from mushin_box._image.digest import image_sha256
from mushin_box._image.sif import HEADER_SIZE, MAGIC, SifFormatError, read_sif_descriptors

StrPath = str | os.PathLike[str]


@public
class PreflightError(MushinBoxError, RuntimeError):
    """The image cannot run this job; ``problems`` lists why, each with what to do."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("image pre-flight failed:\n- " + "\n- ".join(self.problems))


@public
class PreflightWarning(UserWarning):
    """Pre-flight could not verify something (no manifest): the run continues."""


@public
@attrs.frozen(kw_only=True)
class PreflightReport:
    """What :func:`preflight` established about the image.

    Attributes
    ----------
    image, sif_sha256 : str
        The image, and its sha256 computed now.
    sif_size : int
    manifest : str or None
        The manifest checked against (None: none found, digest unverified).
    verified : bool
        ``sif_sha256`` equals the manifest's.
    image_python, submit_python : str or None, str
        ``major.minor`` of the image's Python (from the manifest) and of this process.
    sif_uuid, definition_sha256, base_digest, recipe
        From the manifest (None, or an empty recipe, without one).
    apptainer_version : str or None
        :func:`runtime_apptainer_version` of the submit host.
    warnings : tuple of str
    """

    image: str
    sif_sha256: str
    sif_size: int
    manifest: str | None
    verified: bool
    image_python: str | None
    submit_python: str
    sif_uuid: str | None = None
    definition_sha256: str | None = None
    base_digest: str | None = None
    apptainer_version: str | None = None
    recipe: Mapping[str, str | None] = attrs.field(factory=dict[str, str | None])
    warnings: tuple[str, ...] = ()

    @property
    def identity(self) -> ImageIdentity:
        """What the env file carries to every rank (``MUSHIN_SIF_SHA256``, ...)."""
        return ImageIdentity(
            sif_sha256=self.sif_sha256,
            sif_uuid=self.sif_uuid,
            definition_sha256=self.definition_sha256,
            base_digest=self.base_digest,
            apptainer_version=self.apptainer_version,
            **self.recipe,
        )


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


def _not_a_sif(path: Path) -> str | None:
    """The one-line problem with ``path`` as a SIF image; ``None`` when it reads as one.

    Checked with or without a manifest, before hashing. A truncated copy has the whole
    image's header, so the descriptor table is read too: every object must lie in the file.
    """
    head = b""
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEADER_SIZE)
        if not head:
            return f"image {path} is not a SIF image (an empty file)"
        read_sif_descriptors(path)  # the header, the descriptor table, each object's extent
    except OSError as error:
        return f"image {path} cannot be read: {error.strerror or error}"
    except SifFormatError as error:
        if MAGIC not in head:  # no SIF at all: show what the file is instead
            return f"image {path} is not a SIF image (it starts with {head[:24]!r})"
        if error.truncated:
            return (
                f"image {path} is a truncated SIF image "
                f"({error.detail}): copy it again in full, "
                f"or rebuild it with `mushin-box build SPEC -o {path}`"
            )
        return f"image {path} is not a SIF image ({error.text})"  # a damaged SIF
    return None


def runtime_apptainer_version(*, timeout_s: float = 10.0) -> tuple[str | None, str | None]:
    """``apptainer --version`` of this host, without the ``apptainer version`` prefix.

    ``(None, None)`` without ``apptainer`` on PATH (normal on a login node); ``(None, why)``
    when it did not answer within ``timeout_s`` or failed.

    >>> import os
    >>> path = os.environ.get("PATH")
    >>> os.environ["PATH"] = "/nonexistent"
    >>> runtime_apptainer_version()
    (None, None)
    >>> os.environ["PATH"] = path
    """
    exe = shutil.which("apptainer")
    if exe is None:
        return None, None
    try:  # bounded: a hung binary (a stale network filesystem) must not block a submit
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, f"`{exe} --version` did not answer within {timeout_s:g} s"
    except OSError as error:
        return None, f"`{exe} --version` could not run: {error}"
    text = proc.stdout.strip()
    if proc.returncode != 0 or not text or "\n" in text:
        return None, f"`{exe} --version` failed (exit {proc.returncode}): {proc.stderr.strip()}"
    return text.removeprefix("apptainer version ").strip(), None


@public
def preflight(
    image: StrPath,
    *,
    manifest: Manifest | StrPath | None = None,
    python_version: str | None = None,
) -> PreflightReport:
    """Check the image before submitting: it exists and is a SIF image, its bytes are the
    ones its manifest records, and its Python matches the submitting one (submitit pickles
    the job here and unpickles it in the image).

    Parameters
    ----------
    image : str or os.PathLike
        The ``.sif``.
    manifest : Manifest, path or None
        The build manifest; default ``<image>.manifest.json`` when it exists. Without one
        the digest is computed and returned unverified, with a :class:`PreflightWarning`.
    python_version : str, optional
        The submitting Python (default: this interpreter's ``major.minor``).

    Raises
    ------
    PreflightError
        Listing every problem found, each with the fix.

    Examples
    --------
    >>> import struct, tempfile, uuid, warnings
    >>> header = struct.pack("<32s10s3s3s16s8q", b"#!/usr/bin/env run-singularity\\n",
    ...                      b"SIF_MAGIC\\0", b"01\\0", b"02\\0", uuid.UUID(int=7).bytes,
    ...                      0, 0, 48, 48, 4096, 48 * 585, 32176, 0)
    >>> sif = Path(tempfile.mkdtemp()) / "i.sif"
    >>> _ = sif.write_bytes(header.ljust(32176, b"\\0"))  # an empty SIF: 48 free descriptors
    >>> with warnings.catch_warnings(record=True):  # no manifest beside it
    ...     report = preflight(sif)
    >>> report.verified, report.sif_sha256[:12]
    (False, '0be97f16e05d')
    >>> _ = sif.write_text("%post\\n")  # a text file is refused, manifest or not
    >>> try:
    ...     preflight(sif)
    ... except PreflightError as error:
    ...     print(error.problems[0])  # doctest: +ELLIPSIS
    image .../i.sif is not a SIF image (it starts with b'%post\\n'): build it with `mushin-box ...`
    """
    local = _major_minor(python_version or f"{sys.version_info[0]}.{sys.version_info[1]}")
    path = Path(image)
    if not path.exists():
        problem = (
            f"image {path} does not exist: build it with `mushin-box build SPEC -o {path}` "
            "or point image= at the built .sif (on a filesystem the compute nodes see)"
        )
    elif not path.is_file():
        problem = (
            f"image {path} is not a file (a sandbox directory has no digest to record): "
            "build a SIF with `mushin-box build`"
        )
    elif (problem := _not_a_sif(path)) is not None and "rebuild it" not in problem:
        problem += f": build it with `mushin-box build SPEC -o {path}`"
    if problem is not None:
        raise PreflightError([problem])
    digest, size = image_sha256(path), path.stat().st_size  # cached per file version
    notes: list[str] = []
    problems: list[str] = []
    found: Manifest | None = None
    where: str | None = None
    if isinstance(manifest, Manifest):
        found, where = manifest, "the given manifest"
    else:
        mpath = Path(manifest) if manifest is not None else manifest_path(path)
        if mpath.exists():
            try:
                found, where = read_manifest(mpath), str(mpath)
            except (OSError, ValueError, TypeError) as error:
                problems.append(f"manifest {mpath} is unreadable ({error}): rebuild the image")
        elif manifest is not None:
            problems.append(f"manifest {mpath} does not exist: pass the image's manifest")
        else:
            notes.append(
                f"no manifest for {path} (looked for {mpath}): recorded its sha256 {digest} "
                "now, unverified; `mushin-box build` writes a manifest beside the image"
            )
    image_python: str | None = None
    if found is not None:
        if found.sif_sha256 is None:
            problems.append(
                f"{where} records no sif_sha256 (a --dry-run manifest?): build the image "
                "with `mushin-box build` to record its digest"
            )
        elif found.sif_sha256 != digest:
            problems.append(
                f"image {path} has sha256 {digest}, {where} records {found.sif_sha256}: the "
                "image changed after its build (rebuilt, signed, partly copied). Rebuild it "
                "with `mushin-box build` (new manifest) or restore the image it describes"
            )
        if found.python_version:
            image_python = _major_minor(found.python_version)
            if image_python != local:
                problems.append(
                    f"the image runs Python {image_python}, the submitting Python is {local}: "
                    "submitit pickles the job here and unpickles it in the image, which needs "
                    f"the same major.minor. Submit from a Python {image_python} environment "
                    f"or rebuild the image with Python {local}"
                )
        else:
            notes.append(f"{where} records no python_version: not checked against {local}")
    elif not problems:
        notes.append("the image's Python version is unknown without a manifest: not checked")
    if problems:
        raise PreflightError(problems)
    apptainer_version, why = runtime_apptainer_version()
    if why is not None:
        notes.append(f"{why}: MUSHIN_APPTAINER_VERSION is not recorded")
    for note in notes:
        warnings.warn(note, PreflightWarning, stacklevel=2)
    return PreflightReport(
        image=str(path),
        sif_sha256=digest,
        sif_size=size,
        manifest=where,
        verified=found is not None,
        image_python=image_python,
        submit_python=local,
        sif_uuid=getattr(found, "sif_uuid", None),
        definition_sha256=getattr(found, "definition_sha256", None),
        base_digest=getattr(found, "base_digest", None),
        apptainer_version=apptainer_version,
        recipe={k: getattr(found, k, None) for k in IMAGE_RECIPE_ENV} if found else {},
        warnings=tuple(notes),
    )
