# SPDX-License-Identifier: MIT
"""Pre-flight of a rank image, before anything is submitted: the image exists, its sha256
matches its build manifest, and its Python major.minor equals the submitting one (the job
is pickled)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import attrs

from mushin_box._build import Manifest, manifest_path, read_manifest
from mushin_box._sif import file_sha256

__all__ = ["PreflightError", "PreflightReport", "PreflightWarning", "preflight"]

StrPath = str | os.PathLike[str]


class PreflightError(RuntimeError):
    """The image cannot run this job; ``problems`` lists why, each with what to do."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("image pre-flight failed:\n- " + "\n- ".join(self.problems))


class PreflightWarning(UserWarning):
    """Pre-flight could not verify something (no manifest): the run continues."""


@attrs.frozen(kw_only=True)
class PreflightReport:
    """What :func:`preflight` established about the image.

    Attributes
    ----------
    image : str
    sif_sha256 : str
        Computed now from the file (streamed).
    sif_size : int
    manifest : str or None
        The manifest checked against (None: none found, digest recorded unverified).
    verified : bool
        ``sif_sha256`` equals the manifest's.
    image_python, submit_python : str or None, str
        ``major.minor`` of the image's Python (from the manifest) and of this process.
    warnings : tuple of str
    """

    image: str
    sif_sha256: str
    sif_size: int
    manifest: str | None
    verified: bool
    image_python: str | None
    submit_python: str
    warnings: tuple[str, ...] = ()


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])


def preflight(
    image: StrPath,
    *,
    manifest: Manifest | StrPath | None = None,
    python_version: str | None = None,
) -> PreflightReport:
    """Check the image before submitting: it exists, its bytes are the ones its manifest
    records, and its Python matches the submitting one (submitit pickles the job here and
    unpickles it in the image).

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
    >>> import tempfile, warnings
    >>> sif = Path(tempfile.mkdtemp()) / "i.sif"
    >>> _ = sif.write_bytes(b"SIF")
    >>> with warnings.catch_warnings(record=True):
    ...     report = preflight(sif)
    >>> report.verified, report.sif_sha256[:12]
    (False, '6589689c4856')
    """
    local = _major_minor(python_version or f"{sys.version_info[0]}.{sys.version_info[1]}")
    path = Path(image)
    if not path.exists():
        raise PreflightError([
            f"image {path} does not exist: build it with `mushin-box build SPEC -o {path}` "
            "or point image= at the built .sif (on a filesystem the compute nodes see)"
        ])  # fmt: skip
    if not path.is_file():
        raise PreflightError([
            f"image {path} is not a file (a sandbox directory has no digest to record): "
            "build a SIF with `mushin-box build`"
        ])  # fmt: skip
    digest, size = file_sha256(path), path.stat().st_size
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
    for note in notes:
        warnings.warn(note, PreflightWarning, stacklevel=2)
    return PreflightReport(
        image=str(path),
        sif_sha256=digest,
        sif_size=size,
        manifest=where if found is not None else None,
        verified=found is not None,
        image_python=image_python,
        submit_python=local,
        warnings=tuple(notes),
    )
