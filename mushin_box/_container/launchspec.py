# SPDX-License-Identifier: MIT
"""What the rank container is: validated, frozen values (``ContainerLaunch`` and its parts),
rendered by :mod:`mushin_box._container.rankwrap`. Every check runs when a value is built,
so a bad bind, variable or option fails on the submit host, not inside a job
(``docs/containers.md``). ``--contain``/``--containall`` are refused: each contained rank
gets its own ``/dev/shm``, so NCCL turns off P2P and SHM between a node's ranks. A
secret-looking variable (:func:`mushin_box._core.redact.is_secret_name`) is forwarded by
reference, never written to the env file on disk.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from mushin_box._core import layout
from mushin_box._core.redact import is_secret_name
from mushin_box._core.targets import public

#: Slurm variables every rank needs (Lightning's ``SLURMEnvironment``, submitit's
#: ``SlurmJobEnvironment``), forwarded as ``NAME="${NAME:?}"``: missing = failed launch.
REQUIRED_SLURM_VARS: tuple[str, ...] = tuple(
    "SLURM_JOB_ID SLURM_JOB_NAME SLURM_NNODES SLURM_JOB_NUM_NODES SLURM_NODELIST "
    "SLURM_JOB_NODELIST SLURM_NTASKS SLURM_NTASKS_PER_NODE SLURM_NODEID SLURM_PROCID "
    "SLURM_LOCALID".split()
)
#: Forwarded as ``NAME="${NAME:-default}"`` (set only in some jobs: arrays, requeues, ...).
OPTIONAL_SLURM_VARS: dict[str, str] = {
    **dict.fromkeys(("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"), ""),
    "SLURM_RESTART_COUNT": "0",
    **dict.fromkeys(
        "SLURM_TASKS_PER_NODE SLURM_STEP_ID SLURM_STEP_NODELIST SLURM_STEP_NUM_TASKS "
        "SLURM_STEP_TASKS_PER_NODE SLURM_DISTRIBUTION SLURMD_NODENAME SLURM_GPUS_ON_NODE "
        "SLURM_JOB_PARTITION SLURM_JOB_ACCOUNT SLURM_CLUSTER_NAME SUBMITIT_EXECUTOR".split(),
        "",
    ),
    layout.JOB_NODES_ENV: "",  # the job's nodes, expanded by the batch script on the host
}
#: Host variables Apptainer forwards even with ``--cleanenv`` (``alwaysPassKeys``).
APPTAINER_ALWAYS_PASS: tuple[str, ...] = tuple(
    "TERM http_proxy HTTP_PROXY https_proxy HTTPS_PROXY no_proxy NO_PROXY all_proxy ALL_PROXY "
    "ftp_proxy FTP_PROXY".split()
)
#: Bound when it exists (needed under ``mount dev = minimal``; harmless otherwise).
INFINIBAND_DEVICE = "/dev/infiniband"
#: :class:`ImageIdentity` field -> the env-file variable every rank gets (written only when
#: known). The provenance reader looks these names up: they are an interface, keep them.
IMAGE_IDENTITY_VARS: dict[str, str] = {
    **layout.IMAGE_IDENTITY_ENV,
    "apptainer_version": layout.CONTAINER_ENV["apptainer_version"],
}
#: Written last in the env file, about the file itself: the rank's exact ``apptainer exec``
#: command (shell-quoted) and the file's own absolute path.
SELF_REFERENCE_VARS: tuple[str, ...] = (
    layout.CONTAINER_ENV["rank_command"],
    layout.CONTAINER_ENV["env_file"],
)

_MANAGED = frozenset(
    {*REQUIRED_SLURM_VARS, *OPTIONAL_SLURM_VARS, "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES"}
    | {"ROCR_VISIBLE_DEVICES", "MASTER_PORT", layout.MASTER_PORT_ENV, "PYTHONNOUSERSITE"}
    | {layout.RUN_ID_ENV, *IMAGE_IDENTITY_VARS.values(), *layout.IMAGE_RECIPE_ENV.values()}
    | set(SELF_REFERENCE_VARS)
)
_APPTAINER_SPECIAL = frozenset(
    {"HOME", "PATH", "LD_LIBRARY_PATH", "PREPEND_PATH", "APPEND_PATH", "UID", "GID"}
    | {"PREPEND_LD_LIBRARY_PATH", "APPEND_LD_LIBRARY_PATH", "LANG"}
)
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_BIND_OPTIONS = ("ro", "rw")
_BIND_SEPARATORS = (
    (":", "separates src:dst:opts"),
    (",", "separates binds"),
    ("^", "splits a bind in Apptainer's parser"),
    ("\\", "escapes ':' and ','"),
)
# ranks need host networking (NCCL, the TCPStore) and a shared /dev/shm (NCCL P2P/SHM)
_REFUSED_ARGS: dict[str, str] = {
    "--contain": "each contained rank gets its own /dev/shm, so NCCL disables P2P and SHM "
    "between ranks on a node; /tmp and $HOME become 64 MiB in-memory directories",
    "--containall": "it implies --contain (separate /dev/shm: NCCL P2P/SHM off) plus PID/IPC "
    "namespaces",
    "--net": "a network namespace hides the host NICs NCCL and the rendezvous use",
    "--network": "a network namespace hides the host NICs NCCL and the rendezvous use",
    "--env": "--env splits values with two '=' on commas; pass env= (written to the env file)",
    "--env-file": "the rank wrapper writes the env file; pass env= instead",
    "--bind": "pass binds= (validated)",
    **dict.fromkeys(("--pwd", "--cwd"), "the working directory is set by the rank wrapper"),
    "--nv": "pass nv=True",
    "--rocm": "pass rocm=True",
    "--no-eval": "pass no_eval=True (the env file is quoted for it)",
}
_SHORT_FLAGS = {"-c": "--contain", "-C": "--containall", "-n": "--net", "-B": "--bind"}


def plain_text(value: object, where: str, *, allow_newline: bool = False) -> str:
    """``value`` if it is text that can reach a rank (UTF-8, no NUL/CR/newline), else raise."""
    if not isinstance(value, str):
        raise TypeError(f"{where} must be a str, got {type(value).__qualname__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where}={value!r} is not valid UTF-8 text") from None
    bad = "\x00\r" if allow_newline else "\x00\r\n"
    if any(c in value for c in bad):
        shown = "NUL or carriage return" if allow_newline else "NUL, newline or carriage return"
        raise ValueError(f"{where}={value!r}: {shown} cannot be passed to a rank")
    return value


def absolute_path(value: object, where: str, *, bind: bool = True) -> str:
    """``value`` as an absolute path that can reach a rank (and, ``bind``, a bind spec)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    text = plain_text(value, where)
    if not text.startswith("/"):
        raise ValueError(f"{where}={text!r} must be absolute (try {os.path.abspath(text)!r})")
    if "${" in text:
        raise ValueError(f"{where}={text!r}: '${{' reads as an OmegaConf interpolation")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError(f"{where}={text!r} contains control characters")
    if bind:
        for char, why in _BIND_SEPARATORS:
            if char in text:
                raise ValueError(
                    f"{where}={text!r}: {char!r} {why} in Apptainer's --bind syntax; "
                    "bind a parent directory or use a path without it"
                )
        if text != text.strip():
            raise ValueError(f"{where}={text!r}: Apptainer strips whitespace around bind parts")
    return os.path.normpath(text) if text != "/" else text


def _bind_dst(value: object) -> str | None:
    return None if value is None else absolute_path(value, "bind destination")


@public
@attrs.frozen
class Bind:
    """One ``--bind src[:dst[:opts]]``; build it from a string with :meth:`parse`.

    Examples
    --------
    >>> Bind.parse("/datasets/imagenet:/data:ro").spec
    '/datasets/imagenet:/data:ro'
    >>> Bind.parse("/scratch").spec, Bind("/a", options=("ro",)).spec
    ('/scratch', '/a:/a:ro')
    >>> Bind.parse("/a,b")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: bind='/a,b': ',' separates binds in Apptainer's --bind syntax; ...
    """

    src: str = attrs.field(converter=partial(absolute_path, where="bind source"))
    dst: str | None = attrs.field(default=None, kw_only=True, converter=_bind_dst)
    options: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=tuple)

    def __attrs_post_init__(self) -> None:
        for opt in self.options:
            if opt not in _BIND_OPTIONS:
                raise ValueError(f"bind option {opt!r}: the rank wrapper accepts {_BIND_OPTIONS}")
        if len(self.options) > 1:
            raise ValueError(f"bind options {self.options}: give at most one of ro, rw")

    @classmethod
    def parse(cls, spec: str) -> Bind:
        """Parse ``src[:dst[:opts]]`` (one bind; ``opts`` is ``ro`` or ``rw``)."""
        text = plain_text(spec, "bind")
        if "," in text:
            raise ValueError(
                f"bind={text!r}: ',' separates binds in Apptainer's --bind syntax; "
                "give one bind per list item"
            )
        parts = text.split(":")
        if len(parts) > 3:
            raise ValueError(f"bind={text!r}: expected src[:dst[:opts]] ({len(parts)} parts)")
        options = (parts[2],) if len(parts) == 3 else ()
        return cls(parts[0], dst=parts[1] if len(parts) > 1 else None, options=options)

    @property
    def spec(self) -> str:
        """The ``--bind`` value."""
        dst = self.dst or self.src
        if self.options:
            return f"{self.src}:{dst}:{','.join(self.options)}"
        return self.src if dst == self.src else f"{self.src}:{dst}"


def _binds(value: Sequence[Bind | str]) -> tuple[Bind, ...]:
    if isinstance(value, str):
        raise TypeError("binds must be a list of 'src[:dst[:opts]]' strings or Bind objects")
    return tuple(b if isinstance(b, Bind) else Bind.parse(b) for b in value)


def _env_value(name: str, value: object) -> str | None:
    if value is None:  # forwarded from the submitting environment by reference
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(
            f"env[{name!r}] must be a str, an int or None (forward it from the submitting "
            f"environment), got {type(value).__qualname__}"
        )
    if is_secret_name(name):
        # the env file is a file on a shared filesystem: a literal secret would stay there
        raise ValueError(
            f"env {name!r} looks like a secret, and env values are written to the env file "
            f"on disk. Export it in the submitting shell and pass env={{{name!r}: None}}: "
            f'every rank then gets it by reference ({name}="${{{name}:?}}"), never by value'
        )
    return plain_text(str(value), f"env[{name!r}]", allow_newline=True)


def _env_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{where} name {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def _pairs(
    value: Mapping[str, object] | Sequence[tuple[str, object]],
) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in dict(value).items()))


@public
@attrs.frozen(kw_only=True)
class NcclProfile:
    """The NCCL (and ``TORCH_NCCL_*``) variables every rank gets; ``None`` fields are not
    written, ``extra`` holds any other. Presets: :data:`NCCL_PRESETS`.

    Examples
    --------
    >>> NcclProfile(socket_ifname="ib0", ib_hca="mlx5_0,mlx5_1").to_env()
    {'NCCL_DEBUG': 'WARN', 'NCCL_SOCKET_IFNAME': 'ib0', 'NCCL_IB_HCA': 'mlx5_0,mlx5_1', \
'TORCH_NCCL_ASYNC_ERROR_HANDLING': '3'}
    >>> NCCL_PRESETS["debug"].to_env()["NCCL_DEBUG_SUBSYS"]
    'INIT,NET'
    """

    debug: str | None = "WARN"
    debug_subsys: str | None = None
    socket_ifname: str | None = None
    ib_hca: str | None = None
    async_error_handling: int | None = 3
    extra: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)

    def __attrs_post_init__(self) -> None:
        if self.debug not in (None, "VERSION", "WARN", "INFO", "TRACE"):
            raise ValueError(f"NCCL debug={self.debug!r}: one of VERSION, WARN, INFO, TRACE")
        for name, value in self.to_env().items():
            if any(c.isspace() for c in value) or not value:
                raise ValueError(f"{name}={value!r}: NCCL values are non-empty, without spaces")
        for name, _ in self.extra:
            _env_name(name, "nccl extra")
            if not name.startswith(("NCCL_", "TORCH_NCCL_")):
                raise ValueError(f"nccl extra {name!r}: only NCCL_* and TORCH_NCCL_* names")

    def to_env(self) -> dict[str, str]:
        """The variables, in the order they are written."""
        out = {
            "NCCL_DEBUG": self.debug,
            "NCCL_DEBUG_SUBSYS": self.debug_subsys,
            "NCCL_SOCKET_IFNAME": self.socket_ifname,
            "NCCL_IB_HCA": self.ib_hca,
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": self.async_error_handling,
        }
        return {k: str(v) for k, v in out.items() if v is not None} | dict(self.extra)


#: ``default``: WARN, async error handling pinned to PyTorch's default (3). ``debug``: INFO
#: with INIT,NET (first run of a new cluster or image). ``p2p-off``: last resort of the P2P
#: hang ladder (NCCL's troubleshooting guide); slow intra-node traffic, record why you used it.
NCCL_PRESETS: dict[str, NcclProfile] = {
    "default": NcclProfile(),
    "debug": NcclProfile(debug="INFO", debug_subsys="INIT,NET"),
    "p2p-off": NcclProfile(extra={"NCCL_P2P_DISABLE": "1"}),
}


def _nccl(value: NcclProfile | str | None) -> NcclProfile | None:
    if isinstance(value, str):
        if value not in NCCL_PRESETS:
            raise ValueError(f"nccl={value!r}: presets are {sorted(NCCL_PRESETS)}")
        return NCCL_PRESETS[value]
    return value


@public
@attrs.frozen(kw_only=True)
class MasterPort:
    """``MASTER_PORT`` for the rendezvous: a fixed port, or (default) one per job, exported
    by the batch script (Lightning's default, 15000 + the job id's last four digits): every
    rank of a job agrees, and jobs sharing a node do not.

    Examples
    --------
    >>> MasterPort().setup_line()
    'export MUSHIN_MASTER_PORT=$(( 15000 + SLURM_JOB_ID % 10000 ))'
    >>> MasterPort(fixed=29500).setup_line() is None
    True
    """

    fixed: int | None = None
    base: int = 15000
    span: int = 10000

    def __attrs_post_init__(self) -> None:
        for name in ("fixed", "base", "span"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"MasterPort.{name} must be an int, got {v!r}")
        if self.fixed is not None and not 1024 <= self.fixed <= 65535:
            raise ValueError(f"MasterPort(fixed={self.fixed}): use a port in 1024..65535")
        if self.span < 1 or self.base < 1024 or self.base + self.span - 1 > 65535:
            raise ValueError(f"MasterPort(base={self.base}, span={self.span}) leaves 1024..65535")

    def port_of(self, job_id: str | int) -> int:
        """The port of SLURM job ``job_id`` (its ``SLURM_JOB_ID``), as :meth:`setup_line`
        computes it in the batch script; the fixed port when there is one.

        >>> MasterPort().port_of("123456"), MasterPort(base=25000).port_of(7)
        (18456, 25007)
        """
        return self.fixed if self.fixed is not None else self.base + int(job_id) % self.span

    def setup_line(self) -> str | None:
        """The batch-script line that exports the job's port (None for a fixed port)."""
        if self.fixed is not None:
            return None
        return f"export MUSHIN_MASTER_PORT=$(( {self.base} + SLURM_JOB_ID % {self.span} ))"


def _master_port(value: MasterPort | int) -> MasterPort:
    return MasterPort(fixed=value) if isinstance(value, int) else value


def _env_mapping(value: Mapping[str, Any] | None) -> tuple[tuple[str, str | None], ...]:
    items = dict(value or {})
    for name in items:
        _env_name(name, "env")
        if name.startswith(("APPTAINER", "SINGULARITY")):
            raise ValueError(f"env {name!r}: APPTAINER*/SINGULARITY* configure Apptainer itself")
        if name in _APPTAINER_SPECIAL:
            raise ValueError(
                f"env {name!r} is special to Apptainer (dropped, appended to, or set by it); "
                "set it in the image (ImageSpec.env) or with an Apptainer option"
            )
        if name in _MANAGED:
            raise ValueError(f"env {name!r} is set by the rank wrapper itself")
        if name.startswith(("NCCL_", "TORCH_NCCL_")):
            raise ValueError(f"env {name!r}: pass NCCL settings as nccl=NcclProfile(...)")
    return tuple(sorted((k, _env_value(k, v)) for k, v in items.items()))


def _extra_args(value: Sequence[str]) -> tuple[str, ...]:
    args = tuple(plain_text(a, "extra_args item") for a in value)
    for arg in args:
        flag = _SHORT_FLAGS.get(arg, arg.split("=", 1)[0])
        if flag.startswith("-") and not flag.startswith("--") and len(flag) > 2:
            raise ValueError(f"extra_args {arg!r}: give short flags one by one (e.g. -c -e)")
        if flag in _REFUSED_ARGS:
            raise ValueError(f"extra_args {arg!r} refused: {_REFUSED_ARGS[flag]}")
    return args


_BOOL = attrs.validators.instance_of(bool)


@public
@attrs.frozen(kw_only=True)
class ContainerLaunch:
    """How every rank runs in the image: a validated, frozen spec.

    Parameters
    ----------
    image : str
        Absolute path of the ``.sif`` (on a filesystem every node sees).
    binds : sequence of str or Bind
        Extra binds, ``src[:dst[:ro|rw]]`` (the project and working directories always are).
    nv, rocm : bool
        ``--nv`` (default) or ``--rocm``, not both; forwards ``CUDA_VISIBLE_DEVICES`` (resp.
        ``ROCR_VISIBLE_DEVICES``) as required.
    env : mapping of str to str, int or None
        Extra variables for every rank, written literally; ``None`` forwards one from the
        submitting environment by reference (``NAME="${NAME:?}"``: required, never
        written). Secret-looking names (``*_TOKEN``, ``*_API_KEY``, ...) accept only ``None``.
    nccl : NcclProfile, preset name or None
        NCCL variables; ``"default"`` unless given; None writes none.
    master_port : MasterPort or int
        Rendezvous port policy (int = fixed port). Default: one port per job.
    project_dir : str
        Bound at the same path; default: the current directory.
    python : str
        The image's Python command.
    infiniband : bool or None
        Bind :data:`INFINIBAND_DEVICE`; None: if it exists on the submit host.
    no_eval : bool
        Add ``--no-eval`` (Apptainer >= 1.1): values are evaluated once, on the host.
    extra_args : sequence of str
        More ``apptainer exec`` options (``--contain``, ``--net`` and those of this spec
        are refused, with the reason).

    Examples
    --------
    >>> spec = ContainerLaunch(image="/img/train.sif", project_dir="/home/a/proj",
    ...                        binds=["/data:/data:ro"], env={"WANDB_MODE": "offline"})
    >>> spec.nccl.debug, spec.master_port.fixed, [b.spec for b in spec.binds]
    ('WARN', None, ['/data:/data:ro'])
    >>> ContainerLaunch(image="/i.sif", extra_args=["--contain"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: extra_args '--contain' refused: each contained rank gets its own /dev/shm, ...

    A secret is forwarded from the submitting environment, never written down:

    >>> ContainerLaunch(image="/i.sif", env={"WANDB_API_KEY": None}).env
    (('WANDB_API_KEY', None),)
    >>> ContainerLaunch(image="/i.sif", env={"WANDB_API_KEY": "abc123"})
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: env 'WANDB_API_KEY' looks like a secret, ... pass env={'WANDB_API_KEY': None}: ...
    """

    image: str = attrs.field(converter=partial(absolute_path, where="image", bind=False))
    binds: tuple[Bind, ...] = attrs.field(default=(), converter=_binds)
    nv: bool = attrs.field(default=True, validator=_BOOL)
    rocm: bool = attrs.field(default=False, validator=_BOOL)
    env: tuple[tuple[str, str | None], ...] = attrs.field(default=None, converter=_env_mapping)
    nccl: NcclProfile | None = attrs.field(default=NCCL_PRESETS["default"], converter=_nccl)
    master_port: MasterPort = attrs.field(factory=MasterPort, converter=_master_port)
    project_dir: str = attrs.field(
        factory=os.getcwd, converter=partial(absolute_path, where="project_dir")
    )
    python: str = "python"
    infiniband: bool | None = attrs.field(default=None, validator=attrs.validators.optional(_BOOL))
    no_eval: bool = attrs.field(default=False, validator=_BOOL)
    extra_args: tuple[str, ...] = attrs.field(default=(), converter=_extra_args)

    def __attrs_post_init__(self) -> None:
        if self.nv and self.rocm:
            raise ValueError("nv=True and rocm=True are exclusive: pick the cluster's GPU vendor")
        if not isinstance(self.python, str) or not re.match(r"^[A-Za-z0-9_./+-]+$", self.python):
            raise ValueError(f"python={self.python!r} must be one command word, e.g. 'python3'")

    @property
    def gpu_variable(self) -> str | None:
        """The device-selection variable forwarded as required, if any."""
        return "CUDA_VISIBLE_DEVICES" if self.nv else "ROCR_VISIBLE_DEVICES" if self.rocm else None


def _identity_text(value: object) -> str | None:
    if value is None:
        return None
    text = plain_text(value, "image identity value")
    if not text:
        raise ValueError("image identity values are non-empty (use None for unknown)")
    return text


@public
@attrs.frozen(kw_only=True)
class ImageIdentity:
    """Which image the ranks run, as the submit host knows it (``preflight(image).identity``):
    what the env file carries to every rank for provenance and fingerprints. ``None``
    fields are unknown and not written.

    Attributes
    ----------
    sif_sha256 : str or None
        sha256 of the image file as it is now: "exactly these bytes ran".
    sif_uuid, definition_sha256, base_digest : str or None
        From the manifest: the SIF header's UUID (nil for reproducible builds, never a
        key), the definition's sha256, the pinned base image digest.
    apptainer_version : str or None
        ``apptainer --version`` on the submit host (compute nodes may differ).
    backend, spec, context_commit, context_dir, recipe_sha256 : str or None
        The recipe from the manifest (:data:`IMAGE_RECIPE_ENV`), for ``reproduce
        --rebuild-image``.

    Examples
    --------
    >>> ImageIdentity(sif_sha256="ab" * 32, apptainer_version="1.3.4").to_env()
    ... # doctest: +NORMALIZE_WHITESPACE
    {'MUSHIN_SIF_SHA256': 'abababababababababababababababababababababababababababababababab',
     'MUSHIN_APPTAINER_VERSION': '1.3.4'}
    """

    sif_sha256: str | None = attrs.field(default=None, converter=_identity_text)
    sif_uuid: str | None = attrs.field(default=None, converter=_identity_text)
    definition_sha256: str | None = attrs.field(default=None, converter=_identity_text)
    base_digest: str | None = attrs.field(default=None, converter=_identity_text)
    apptainer_version: str | None = attrs.field(default=None, converter=_identity_text)
    backend: str | None = attrs.field(default=None, converter=_identity_text)
    spec: str | None = attrs.field(default=None, converter=_identity_text)
    context_commit: str | None = attrs.field(default=None, converter=_identity_text)
    context_dir: str | None = attrs.field(default=None, converter=_identity_text)
    recipe_sha256: str | None = attrs.field(default=None, converter=_identity_text)

    def to_env(self) -> dict[str, str]:
        """The known fields as env-file variables: :data:`IMAGE_IDENTITY_VARS`, then
        :data:`IMAGE_RECIPE_ENV`, in their order."""
        values = attrs.asdict(self)
        named = {**IMAGE_IDENTITY_VARS, **layout.IMAGE_RECIPE_ENV}
        return {var: values[f] for f, var in named.items() if values[f] is not None}
