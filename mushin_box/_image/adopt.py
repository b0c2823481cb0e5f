# SPDX-License-Identifier: MIT
"""Adopt an image the kit did not build: write its manifest, as ``build`` would have.

A site's shared image, or one built by hand, has no manifest, so pre-flight could only hash
it: :func:`adopt_image` reads the image's SIF header and packages (``apptainer exec``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from mushin_box._core.sidecars import write_json_atomic
from mushin_box._core.version import __version__
from mushin_box._image import build
from mushin_box._image.sif import SifFormatError, read_sif_header

#: ``base_image`` of an adopted image's manifest: the kit did not choose its base
ADOPTED = "adopted"


def adopt_image(
    image: str | os.PathLike[str], *, python: str = "python", force: bool = False
) -> build.Manifest:
    """Write the manifest of an existing SIF and return it. Refused: no such file
    (``FileNotFoundError``), not a whole SIF or a manifest already beside it without
    ``force`` (``ValueError``), no Apptainer to read the image's packages through."""
    path = Path(image).absolute()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such image file")
    try:  # the whole file, not only its header: a truncated copy is refused here
        read_sif_header(path)
        definition = (build.embedded_definition(path) or b"").decode("utf-8", "replace")
    except SifFormatError as exc:
        raise SifFormatError(path, f"cannot be adopted: {exc.text}") from None
    target = build.manifest_path(path)
    if target.exists() and not force:
        raise build.OutputNotWritable(
            target,
            "it exists (perhaps the builder's own record); move it away, or replace it with "
            "{force}",
            arguments={"force": True},
        )
    if shutil.which(build.APPTAINER) is None:
        raise build.ApptainerNotFound("read the image's Python and packages", hint=None)
    manifest = build.Manifest(
        image=path.name,
        definition=definition,
        definition_sha256=hashlib.sha256(definition.encode("utf-8")).hexdigest(),
        base_image=ADOPTED,
        base_digest=None,
        build_argv=(),
        mushin_box_version=__version__,
        **build.probe_image(path, python),
        **build.sif_identity(path),
        apptainer_version=build.apptainer_version(),
    )
    write_json_atomic(target, manifest.to_dict())
    return manifest
