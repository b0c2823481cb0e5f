# SPDX-License-Identifier: MIT
"""The image the tests' ranks run in, as code: Debian bookworm, CPython 3.11 and mushin-box.

Built by the native builder (mmdebstrap, pip, the kit's SIF writer; no Apptainer), from
the repository root (the build context)::

    mushin-box build containers/test-image.py -o /var/cache/mushin-box/test-image/image.sif
    mushin-box build containers/test-image.py --check /var/cache/mushin-box/test-image/image.sif

The tests (``tests/container/test_nsruntime.py``) build it on first use into
``$MUSHIN_TEST_IMAGE_CACHE`` (default ``/var/cache/mushin-box/test-image``); a later run
whose recipe is unchanged keeps it (the build compares the manifest's ``recipe_sha256``).

The pip packages are ``ci/run.lock``, the hash-locked runtime set CI tests (torch: the CPU
wheel), so the ranks in the image run what CI tested; the project is installed last,
``--no-deps``, from its sources. ``SOURCE_DATE_EPOCH`` is fixed here rather than taken
from the lock's commit time, so that a checkout without git history builds the same
bytes. ``MUSHIN_TEST_IMAGE_MIRROR`` points the build at another Debian mirror (it is
recorded in the manifest).
"""

from __future__ import annotations

import os

from mushin_box._image.bases import Debootstrap
from mushin_box._image.spec import ImageSpec, ProjectInstall

__all__ = ["IMAGE"]

MIRROR = os.environ.get("MUSHIN_TEST_IMAGE_MIRROR", "http://deb.debian.org/debian")

IMAGE = ImageSpec(
    base=Debootstrap(suite="bookworm", mirror=MIRROR),
    apt=("python3=3.11.2-1+b1", "python3-venv=3.11.2-1+b1", "ca-certificates=20230311+deb12u1"),
    python="python3",
    venv="/opt/mushin",
    pip_lock="ci/run.lock",
    project=ProjectInstall(
        dest="/opt/mushin-box",
        include=("pyproject.toml", "README.md", "mushin_box", "hydra_plugins"),
        build_isolation=False,  # its build-system (setuptools) is in ci/run.lock, pinned
    ),
    source_date_epoch=1764547200,  # 2025-12-01T00:00:00Z
    labels={"org.opencontainers.image.title": "mushin-box test image"},
    test=("python -c 'import mushin_box, torch, pytorch_lightning, hydra_zen, submitit'",),
)
