# SPDX-License-Identifier: MIT
"""Where a cell ran: its image, container launch and devices, redacted. Never imports
torch nor initializes CUDA: devices are read only once the task has imported torch.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from mushin_box._core.layout import CONTAINER_ENV, IMAGE_IDENTITY_ENV, IMAGE_RECIPE_ENV
from mushin_box._core.redact import redact, redact_text
from mushin_box._core.safeio import read_bounded

#: ``reproducibility.image`` of a process that runs in no container
NO_IMAGE = "no image"
#: ``reproducibility.image`` of a process in a container that did not say which image
UNIDENTIFIED_IMAGE = "unidentified image"
#: the most bytes of the env file recorded
ENV_FILE_LIMIT = 256 * 1024
#: seconds ``nvidia-smi`` may take
NVIDIA_SMI_TIMEOUT_S = 5.0


def image_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The image a rank runs in, from the variables of its env file and Apptainer's path.

    >>> image_from_env({"MUSHIN_SIF_SHA256": "ab12", "MUSHIN_SIF_UUID": "0-1",
    ...                 "APPTAINER_CONTAINER": "/i/x.sif"})
    {'sif_sha256': 'ab12', 'sif_uuid': '0-1', 'path': '/i/x.sif'}
    >>> image_from_env({}) is None
    True
    """
    env = os.environ if environ is None else environ
    named = {**IMAGE_IDENTITY_ENV, **IMAGE_RECIPE_ENV}  # the recipe: located, not identity
    out: dict[str, Any] = {key: env[var] for key, var in named.items() if env.get(var)}
    path = env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER")
    if path:
        out["path"] = path
    return out or None


def split_image(image: Mapping[str, Any] | None) -> tuple[dict[str, Any] | str, dict[str, Any]]:
    """(``reproducibility.image``: the identity keys of :data:`IMAGE_IDENTITY_ENV`,
    ``run.image``: the rest); with no identity, :data:`UNIDENTIFIED_IMAGE` when it still
    says where an image is.

    >>> split_image({"sif_sha256": "ab", "path": "/x.sif", "sif_size": 3})
    ({'sif_sha256': 'ab'}, {'path': '/x.sif', 'sif_size': 3})
    >>> split_image(None), split_image({"path": "/x.sif"})[0]
    (('no image', {}), 'unidentified image')
    """
    if not image:
        return NO_IMAGE, {}
    identity = {k: image[k] for k in IMAGE_IDENTITY_ENV if image.get(k) is not None}
    located = {k: v for k, v in image.items() if k not in IMAGE_IDENTITY_ENV}
    return identity or (UNIDENTIFIED_IMAGE if located else NO_IMAGE), located


def _env_file(path: str) -> dict[str, Any]:
    try:
        data = read_bounded(path, ENV_FILE_LIMIT)
    except OSError as exc:  # missing, unreadable, a symlink, or over the limit: not recorded
        error = f"{type(exc).__name__}: {exc.strerror or exc}"
        return {"path": path, "sha256": None, "text": None, "error": error}
    text = redact_text(data.decode("utf-8", "replace"))
    return {"path": path, "sha256": hashlib.sha256(data).hexdigest(), "text": text}


def container_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """``run.container``: how the rank was started in its container, redacted.

    >>> c = container_from_env({"MUSHIN_APPTAINER_VERSION": "1.3.4",
    ...                         "MUSHIN_RANK_COMMAND": "apptainer exec --nv '/my i.sif' python"})
    >>> c["apptainer_version"], c["rank_argv"], c["env_file"]
    ('1.3.4', ['apptainer', 'exec', '--nv', '/my i.sif', 'python'], None)
    >>> container_from_env({}) is None
    True
    """
    env = os.environ if environ is None else environ
    if not any(env.get(var) for var in CONTAINER_ENV.values()):
        return None
    command = env.get(CONTAINER_ENV["rank_command"]) or None
    argv: list[str] | None = None
    if command is not None:
        try:
            argv = shlex.split(command)
        except ValueError:  # unbalanced quotes: the text, redacted as text
            command = redact_text(command)
        else:
            redacted = redact(argv)
            command, argv = (command if redacted == argv else shlex.join(redacted)), redacted
    env_file = env.get(CONTAINER_ENV["env_file"]) or None
    return {
        "apptainer_version": env.get(CONTAINER_ENV["apptainer_version"]) or None,
        "rank_command": command,
        "rank_argv": argv,
        "env_file": _env_file(env_file) if env_file is not None else None,
    }


@functools.cache
def _nvidia_smi() -> tuple[str | None, tuple[tuple[str, str, str], ...]]:
    """(driver version, ((index, uuid, name), ...)) from ``nvidia-smi``; once per process."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, ()
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None, ()
    return _parse_nvidia_smi(proc.stdout)


def _parse_nvidia_smi(text: str) -> tuple[str | None, tuple[tuple[str, str, str], ...]]:
    """Parse :func:`_nvidia_smi`'s query.

    >>> _parse_nvidia_smi("0, GPU-aa, NVIDIA H200, 550.54.15\\n1, GPU-bb, NVIDIA H100, 550.54.15")
    ('550.54.15', (('0', 'GPU-aa', 'NVIDIA H200'), ('1', 'GPU-bb', 'NVIDIA H100')))
    """
    driver: str | None = None
    gpus: list[tuple[str, str, str]] = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if len(row) != 4:
            continue
        index, uuid, name, version = (x.strip() for x in row)
        gpus.append((index, uuid, name))
        driver = driver or version or None
    return driver, tuple(gpus)


def _visible(
    gpus: Sequence[tuple[str, str, str]], visible: str | None, count: int
) -> list[str] | None:
    """The names of the GPUs ``CUDA_VISIBLE_DEVICES`` shows; ``None``: no sure match."""
    if visible is None:
        chosen = list(gpus)
    else:
        chosen = []
        for item in (x.strip() for x in visible.split(",") if x.strip()):
            match = [
                g
                for g in gpus
                if g[0] == item or (item.startswith("GPU-") and g[1].startswith(item))
            ]
            if len(match) != 1:  # MIG slices, bad entries: do not guess
                return None
            chosen.append(match[0])
    names = [g[2] for g in chosen]
    return names if len(names) == count else None


def _nccl(torch: Any) -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except Exception:  # a CPU build has no NCCL
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def device_facts(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """``run.devices``: versions, the GPUs this process sees and the driver; ``None`` when
    torch is not imported. GPU names come from torch once CUDA is initialized, else from
    ``nvidia-smi`` (asking torch would initialize CUDA).

    >>> import sys
    >>> facts = device_facts()
    >>> facts is None if "torch" not in sys.modules else facts["torch"] is not None
    True
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    env = os.environ if environ is None else environ
    out: dict[str, Any] = dict.fromkeys(("torch", "cuda", "nccl", "cudnn", "driver"))
    out.update(cuda_available=False, count=0, names=[])
    try:
        out["torch"] = str(torch.__version__)
        cuda_version = torch.version.cuda
        out["cuda"] = str(cuda_version) if cuda_version is not None else None
        if out["cuda"] is not None:
            out["nccl"] = _nccl(torch)
            cudnn = torch.backends.cudnn.version()  # loads the library, not a CUDA context
            out["cudnn"] = int(cudnn) if cudnn is not None else None
        cuda = torch.cuda
        if not cuda.is_available():  # neither call initializes CUDA
            return out
        count = int(cuda.device_count())
        out.update(cuda_available=True, count=count)
        driver, gpus = _nvidia_smi()
        out["driver"] = driver
        if cuda.is_initialized():
            out["names"] = [str(cuda.get_device_name(i)) for i in range(count)]
        else:
            out["names"] = _visible(gpus, env.get("CUDA_VISIBLE_DEVICES"), count)
    except Exception as exc:  # a half-imported or unusual torch: keep what is known
        out["error"] = f"{type(exc).__name__}: {exc}"
    return out
