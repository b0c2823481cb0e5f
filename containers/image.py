# SPDX-License-Identifier: MIT
"""The image mushin-box's own runs use, as code.

Build it from the repository root (the build context):

    mushin-box build                      # = containers/image.py:IMAGE -> image.sif
    mushin-box build -o /scratch/images/mushin-box.sif
    mushin-box build --dry-run > /dev/null   # writes image.def, needs no Apptainer

The golden rendering is ``tests/golden/image.def``; after changing this file run
``MUSHIN_UPDATE_GOLDEN=1 pytest tests/image/test_container_build.py`` and review the diff.

pip packages come from a hash-locked file, ``containers/requirements.lock``, generated
from ``PINS`` for the image's platform (CPython 3.11, linux x86_64, glibc 2.28+) by::

    scripts/lock-image            # pinned uv, PyPI only, --exclude-newer: reproducible
    scripts/lock-image --check    # is the lock what PINS give?

(it runs ``uv pip compile --generate-hashes --python-version 3.11 --python-platform
x86_64-manylinux_2_28`` on ``PINS``, read from this file without running it). The torch
wheels on PyPI for linux x86_64 are CUDA builds. GPU clusters that need a specific CUDA
build pass ``--extra-index-url https://download.pytorch.org/whl/cu128`` to
``scripts/lock-image`` (and pin e.g. ``torch==2.13.0+cu128``), then set
``pip_extra_index_urls`` below to the same index.
"""

from __future__ import annotations

from mushin_box._image.spec import ImageSpec, ProjectInstall

__all__ = ["BASE", "IMAGE", "PINS"]

# Debian bookworm + CPython 3.11, pinned by digest. Where this digest comes from: the
# public Dockerfile of github.com/peiyang-z6/BandStructure_AI_Project (path `Dockerfile`,
# commit 031f26d8efa99aa7b48789a61e4834bcc313d355), whose first line is
# `FROM python:3.11-slim-bookworm@sha256:a36c24f9...` (another public Dockerfile uses the
# same digest). It could NOT be verified from the machine that wrote this (Docker
# registries do not resolve there): whether Docker Hub still serves it, and whether it is
# the multi-platform index or the linux/amd64 manifest, is unchecked. A wrong digest cannot
# pull another image (a digest is content-addressed within docker.io/library/python): the
# build fails instead. Verify or refresh it before building, with either of:
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{json .Manifest.Digest}}'
#   skopeo inspect --format '{{.Digest}}' docker://docker.io/library/python:3.11-slim-bookworm
BASE = (
    "python:3.11-slim-bookworm"
    "@sha256:a36c24f9cbdf4fd0f52d67f0823eeac19c2028c637cecc392d97f980d4fec56b"
)

# Top-level pins, the input of containers/requirements.lock (scripts/lock-image reads this
# tuple literally: keep it a tuple of string literals). setuptools is pinned because the
# project is installed with --no-build-isolation.
PINS = (
    "torch==2.13.0",
    "pytorch-lightning==2.6.6",
    "hydra-core==1.3.8",
    "hydra-zen==0.17.2",
    "hydra-submitit-launcher==1.2.0",
    "submitit==1.5.4",
    "rich==15.0.0",
    "attrs==26.1.0",
    "xarray==2026.9.0",
    "numpy==2.4.6",
    "setuptools==84.2.1",
)

IMAGE = ImageSpec(
    base=BASE,
    # InfiniBand userspace for NCCL's IB transport: `--nv` binds the GPU driver, not
    # these (notes/apptainer.md section 3.1). Versions: Debian bookworm.
    apt=(
        "libibverbs1=44.0-2",
        "ibverbs-providers=44.0-2",
        "librdmacm1=44.0-2",
    ),
    pip_lock="containers/requirements.lock",
    env={
        # $HOME is bound into the container: keep ~/.local out of the image's Python.
        "PYTHONNOUSERSITE": "1",
        "PYTHONUNBUFFERED": "1",
    },
    labels={
        "org.opencontainers.image.title": "mushin-box",
        "org.opencontainers.image.description": (
            "PyTorch Lightning DDP ranks for mushin-box experiments"
        ),
        "org.opencontainers.image.licenses": "MIT",
    },
    project=ProjectInstall(
        dest="/opt/mushin-box",
        include=("pyproject.toml", "README.md", "mushin_box", "hydra_plugins"),
    ),
    runscript=("python",),
    test=("python -c 'import mushin_box, torch, pytorch_lightning, hydra_zen, submitit'",),
    help=(
        "mushin-box training image. Ranks run as:\n"
        "  srun apptainer exec --nv --cleanenv --env-file RUN/apptainer.env IMAGE.sif "
        "python -u -m ...\n"
        "Identity: IMAGE.sif.manifest.json (sif_sha256) beside the image."
    ),
)

if __name__ == "__main__":
    print("\n".join(PINS))
