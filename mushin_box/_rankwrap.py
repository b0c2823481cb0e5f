# SPDX-License-Identifier: MIT
"""Run every SLURM rank inside the image: ``apptainer exec`` argv, env file, pre-flight.

One container per srun task (``docs/containers.md``, notes §0/§7)::

    srun --kill-on-bad-exit=1 ... apptainer exec --nv --cleanenv --env-file FILE \\
        --bind PROJECT:PROJECT --bind WORKDIR [--bind /dev/infiniband] --pwd WORKDIR \\
        IMAGE.sif python -u ...

``--cleanenv`` drops every host variable except Apptainer's short pass-list (``TERM`` and
the proxy variables), so the env file is the only channel from host to rank. Apptainer
parses it on the host, once per task, with that task's environment visible (not exported)
and ``allexport`` on: ``SLURM_PROCID="${SLURM_PROCID:?}"`` forwards the task's own value and
fails the launch when Slurm did not set it. Each resulting value is then evaluated a second
time inside the container (``export NAME="<value>"``, only ``"`` escaped) unless
``--no-eval``. Literal values are therefore written so that both evaluations give back
exactly the bytes given here: escape ``\\``, ``$`` and backticks for the second one, then
single-quote for the first. Forwarded Slurm values are not escaped (Apptainer would expand
a ``$`` in a job name inside the container; ``no_eval=True`` avoids that, Apptainer >= 1.1).

Never ``--contain``/``--containall``: each contained rank gets its own ``/dev/shm``, so
NCCL turns off P2P and SHM between ranks on a node (and /tmp, $HOME become 64 MiB).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._preflight import PreflightError, PreflightReport, PreflightWarning, preflight

__all__ = [
    "APPTAINER_ALWAYS_PASS",
    "INFINIBAND_DEVICE",
    "NCCL_PRESETS",
    "OPTIONAL_SLURM_VARS",
    "REQUIRED_SLURM_VARS",
    "Bind",
    "ContainerLaunch",
    "MasterPort",
    "NcclProfile",
    "PreflightError",
    "PreflightReport",
    "PreflightWarning",
    "RankWrapper",
    "container_launcher_fields",
    "env_file_path",
    "preflight",
    "rank_argv",
    "rank_command",
    "render_env_file",
    "render_sbatch_fragment",
    "setup_lines",
    "srun_argv",
]

StrPath = str | os.PathLike[str]

#: Slurm variables every rank needs (Lightning's ``SLURMEnvironment``, submitit's
#: ``SlurmJobEnvironment``), forwarded as ``NAME="${NAME:?}"``: missing = failed launch.
REQUIRED_SLURM_VARS: tuple[str, ...] = (
    "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", "SLURM_NODELIST",
    "SLURM_JOB_NODELIST", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
    "SLURM_PROCID", "SLURM_LOCALID",
)  # fmt: skip
#: Forwarded as ``NAME="${NAME:-default}"`` (set only in some jobs: arrays, requeues, ...).
OPTIONAL_SLURM_VARS: dict[str, str] = {
    "SLURM_ARRAY_JOB_ID": "", "SLURM_ARRAY_TASK_ID": "", "SLURM_RESTART_COUNT": "0",
    "SLURM_TASKS_PER_NODE": "", "SLURM_STEP_ID": "", "SLURM_STEP_NODELIST": "",
    "SLURM_STEP_NUM_TASKS": "", "SLURM_STEP_TASKS_PER_NODE": "", "SLURM_DISTRIBUTION": "",
    "SLURMD_NODENAME": "", "SLURM_GPUS_ON_NODE": "", "SLURM_JOB_PARTITION": "",
    "SLURM_JOB_ACCOUNT": "", "SLURM_CLUSTER_NAME": "", "SUBMITIT_EXECUTOR": "",
}  # fmt: skip
#: Host variables Apptainer forwards even with ``--cleanenv`` (``alwaysPassKeys``).
APPTAINER_ALWAYS_PASS: tuple[str, ...] = (
    "TERM", "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
    "all_proxy", "ALL_PROXY", "ftp_proxy", "FTP_PROXY",
)  # fmt: skip
#: Bound when it exists (needed under ``mount dev = minimal``; harmless otherwise).
INFINIBAND_DEVICE = "/dev/infiniband"

_MANAGED = frozenset(
    {*REQUIRED_SLURM_VARS, *OPTIONAL_SLURM_VARS, "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES"}
    | {"ROCR_VISIBLE_DEVICES", "MASTER_PORT", "MUSHIN_MASTER_PORT", "PYTHONNOUSERSITE"}
    | {"MUSHIN_RUN_ID", "MUSHIN_SIF_SHA256"}
)
_APPTAINER_SPECIAL = frozenset(
    {"HOME", "PATH", "LD_LIBRARY_PATH", "PREPEND_PATH", "APPEND_PATH", "UID", "GID"}
    | {"PREPEND_LD_LIBRARY_PATH", "APPEND_LD_LIBRARY_PATH", "LANG"}
)
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_SAFE_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]+\Z")
_BIND_OPTIONS = ("ro", "rw")
_BIND_SEPARATORS = (
    (":", "separates src:dst:opts"),
    (",", "separates binds"),
    ("^", "splits a bind in Apptainer's parser"),
    ("\\", "escapes ':' and ','"),
)
_ENV_DIR = ".mushin-box"
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
    "--pwd": "the working directory is set by the rank wrapper",
    "--cwd": "the working directory is set by the rank wrapper",
    "--nv": "pass nv=True",
    "--rocm": "pass rocm=True",
    "--no-eval": "pass no_eval=True (the env file is quoted for it)",
}
_SHORT_FLAGS = {"-c": "--contain", "-C": "--containall", "-n": "--net", "-B": "--bind"}


def _plain_text(value: object, where: str, *, allow_newline: bool = False) -> str:
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


def _path(value: object, where: str, *, bind: bool = True) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    text = _plain_text(value, where)
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


def _bind_src(value: object) -> str:
    return _path(value, "bind source")


def _bind_dst(value: object) -> str | None:
    return None if value is None else _path(value, "bind destination")


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

    src: str = attrs.field(converter=_bind_src)
    dst: str | None = attrs.field(default=None, kw_only=True, converter=_bind_dst)
    options: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=tuple)

    def __attrs_post_init__(self) -> None:
        for opt in self.options:
            if opt not in _BIND_OPTIONS:
                raise ValueError(f"bind option {opt!r}: the rank wrapper accepts {_BIND_OPTIONS}")
        if len(set(self.options)) != len(self.options) or len(self.options) > 1:
            raise ValueError(f"bind options {self.options}: give at most one of ro, rw")

    @classmethod
    def parse(cls, spec: str) -> Bind:
        """Parse ``src[:dst[:opts]]`` (one bind; ``opts`` is ``ro`` or ``rw``)."""
        text = _plain_text(spec, "bind")
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


def _env_value(name: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise TypeError(f"env[{name!r}] must be a str (or int), got {type(value).__qualname__}")
    return _plain_text(str(value), f"env[{name!r}]", allow_newline=True)


def _env_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{where} name {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def _pairs(
    value: Mapping[str, object] | Sequence[tuple[str, object]],
) -> tuple[tuple[str, str], ...]:
    items = dict(value)
    return tuple(sorted((str(k), str(v)) for k, v in items.items()))


@attrs.frozen(kw_only=True)
class NcclProfile:
    """The NCCL (and ``TORCH_NCCL_*``) variables every rank gets; recorded with the run.

    ``None`` fields are not written. ``extra`` holds any other ``NCCL_*``/``TORCH_NCCL_*``
    variable (``NCCL_P2P_DISABLE``, ``NCCL_CUMEM_ENABLE``, ...). Presets: :data:`NCCL_PRESETS`.

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
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": (
                None if self.async_error_handling is None else str(self.async_error_handling)
            ),
        }
        env = {k: v for k, v in out.items() if v is not None}
        env.update(self.extra)
        return env


#: ``default``: WARN, async error handling pinned to PyTorch's default (3). ``debug``: INFO
#: with INIT,NET (first run of a new cluster or image). ``p2p-off``: last resort of the P2P
#: hang ladder (notes §3.3); slow intra-node traffic, record why you used it.
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


@attrs.frozen(kw_only=True)
class MasterPort:
    """``MASTER_PORT`` for the rendezvous: a fixed port, or (default) one per job.

    Per job: the batch script exports ``MUSHIN_MASTER_PORT=$(( base + SLURM_JOB_ID % span ))``
    (Lightning's own default, 15000 + the job id's last four digits, made explicit) and the
    env file forwards it, so every rank of a job agrees and jobs sharing a node do not.

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

    def setup_line(self) -> str | None:
        """The batch-script line that exports the job's port (None for a fixed port)."""
        if self.fixed is not None:
            return None
        return f"export MUSHIN_MASTER_PORT=$(( {self.base} + SLURM_JOB_ID % {self.span} ))"


def _master_port(value: MasterPort | int) -> MasterPort:
    return MasterPort(fixed=value) if isinstance(value, int) else value


def _env_mapping(value: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
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
    args = tuple(_plain_text(a, "extra_args item") for a in value)
    for arg in args:
        flag = _SHORT_FLAGS.get(arg, arg.split("=", 1)[0])
        if flag.startswith("-") and not flag.startswith("--") and len(flag) > 2:
            raise ValueError(f"extra_args {arg!r}: give short flags one by one (e.g. -c -e)")
        if flag in _REFUSED_ARGS:
            raise ValueError(f"extra_args {arg!r} refused: {_REFUSED_ARGS[flag]}")
    return args


def _image_path(value: object) -> str:
    return _path(value, "image", bind=False)


def _project_dir(value: object) -> str:
    return _path(value, "project_dir")


_BOOL = attrs.validators.instance_of(bool)


@attrs.frozen(kw_only=True)
class ContainerLaunch:
    """How every rank runs in the image: a validated, frozen spec.

    Parameters
    ----------
    image : str
        Absolute path of the ``.sif`` (on a filesystem every node sees).
    binds : sequence of str or Bind
        Extra binds, ``src[:dst[:ro|rw]]``. The project and working directories are
        always bound.
    nv, rocm : bool
        ``--nv`` (default) or ``--rocm``; not both. Also forwards ``CUDA_VISIBLE_DEVICES``
        (resp. ``ROCR_VISIBLE_DEVICES``) as required.
    env : mapping of str to str
        Extra variables for every rank (written literally: no expansion anywhere).
    nccl : NcclProfile, preset name or None
        NCCL variables; ``"default"`` unless given; None writes none.
    master_port : MasterPort or int
        Rendezvous port policy (int = fixed port). Default: one port per job.
    project_dir : str
        Bound at the same path; default: the current directory.
    python : str
        The image's Python command.
    infiniband : bool or None
        Bind :data:`INFINIBAND_DEVICE`; None = if it exists where the argv is rendered
        (the submit host: set it explicitly when login and compute nodes differ).
    no_eval : bool
        Add ``--no-eval`` (Apptainer >= 1.1): values are evaluated once, on the host.
    extra_args : sequence of str
        More ``apptainer exec`` options; ``--contain``, ``--containall``, ``--net`` and
        the options this spec owns are refused, with the reason.

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
    """

    image: str = attrs.field(converter=_image_path)
    binds: tuple[Bind, ...] = attrs.field(default=(), converter=_binds)
    nv: bool = attrs.field(default=True, validator=_BOOL)
    rocm: bool = attrs.field(default=False, validator=_BOOL)
    env: tuple[tuple[str, str], ...] = attrs.field(default=None, converter=_env_mapping)
    nccl: NcclProfile | None = attrs.field(default=NCCL_PRESETS["default"], converter=_nccl)
    master_port: MasterPort = attrs.field(factory=MasterPort, converter=_master_port)
    project_dir: str = attrs.field(factory=os.getcwd, converter=_project_dir)
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


#: Same thing, by the name the design uses for it.
RankWrapper = ContainerLaunch


def _literal(value: str, *, no_eval: bool) -> str:
    """``value`` as an env-file word that both Apptainer evaluations turn back into ``value``."""
    if not no_eval:  # the container re-evaluates it inside "...": keep \ $ ` literal there
        value = value.replace("\\", "\\\\").replace("$", "\\$").replace("`", "\\`")
    if _SAFE_VALUE_RE.match(value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


def render_env_file(
    spec: ContainerLaunch, *, run_id: str | None = None, sif_sha256: str | None = None
) -> str:
    """The ``--env-file`` every rank's ``apptainer exec`` reads (notes §7.2).

    Parameters
    ----------
    spec : ContainerLaunch
    run_id, sif_sha256 : str, optional
        Written as ``MUSHIN_RUN_ID`` / ``MUSHIN_SIF_SHA256`` when given.

    Returns
    -------
    str
        Plain assignments and comments only (what Apptainer's embedded shell and bash agree
        on): forwarded variables as ``NAME="${NAME:?}"``/``"${NAME:-default}"``, everything
        else literal.

    Examples
    --------
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", env={"GREETING": "it's $5"})
    >>> text = render_env_file(spec)
    >>> 'SLURM_PROCID="${SLURM_PROCID:?}"' in text, 'PYTHONNOUSERSITE=1' in text
    (True, True)
    >>> print(*[line for line in text.splitlines() if line.startswith("GREETING")])
    GREETING='it'\\''s \\$5'

    """
    lit = lambda v: _literal(v, no_eval=spec.no_eval)  # noqa: E731
    second = "are not evaluated again (--no-eval)" if spec.no_eval else (
        "are evaluated once more inside the container")  # fmt: skip
    lines = [
        "# mushin-box rank environment (mushin_box._rankwrap): parsed by Apptainer on the host,",
        "# once per srun task, with that task's environment; ${X:?} = fail the launch if X is",
        f"# unset. Values {second}.",
        *(f'{n}="${{{n}:?}}"' for n in REQUIRED_SLURM_VARS),
        'SLURM_CPUS_PER_TASK="${SLURM_CPUS_PER_TASK:-1}"',
    ]
    if spec.gpu_variable:
        lines.append(f'{spec.gpu_variable}="${{{spec.gpu_variable}:?}}"')
    lines.append("# set only in some jobs (arrays, requeues, ...): empty when unset")
    lines += [f'{n}="${{{n}:-{d}}}"' for n, d in OPTIONAL_SLURM_VARS.items()]
    lines.append(
        "# rendezvous: Lightning takes MASTER_ADDR from SLURM_NODELIST; the port is pinned"
    )
    port = spec.master_port
    if port.fixed is not None:
        lines.append(f"MASTER_PORT={port.fixed}")
    else:
        lines.append('MASTER_PORT="${MUSHIN_MASTER_PORT:?}"')
    if spec.nccl is not None:
        lines.append("# NCCL profile")
        lines += [f"{k}={lit(v)}" for k, v in spec.nccl.to_env().items()]
    user = dict(spec.env)
    hygiene = {"PYTHONUNBUFFERED": "1"}
    lines += ["# hygiene", "PYTHONNOUSERSITE=1"]
    lines += [f"{k}={lit(v)}" for k, v in hygiene.items() if k not in user]
    if "OMP_NUM_THREADS" not in user:
        lines.append('OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"')
    for name, value in (("MUSHIN_RUN_ID", run_id), ("MUSHIN_SIF_SHA256", sif_sha256)):
        if value is not None:
            lines.append(f"{name}={lit(_plain_text(value, name))}")
    if user:
        lines.append("# user environment")
        lines += [f"{k}={lit(v)}" for k, v in user.items()]
    return "\n".join(lines) + "\n"


def env_file_path(working_dir: StrPath, env_text: str) -> str:
    """Where the env file lives: ``<working_dir>/.mushin-box/apptainer-<sha256[:12]>.env``.

    Content-addressed, so one path never holds two different files.

    Examples
    --------
    >>> env_file_path("/runs/r1", "A=1\\n")
    '/runs/r1/.mushin-box/apptainer-91d6a3d55e9f.env'
    """
    digest = hashlib.sha256(env_text.encode("utf-8")).hexdigest()[:12]
    work = _path(working_dir, "working_dir")
    if '"' in work:
        raise ValueError(f"working_dir={work!r}: '\"' would break --env-file's CSV parsing")
    return str(Path(work) / _ENV_DIR / f"apptainer-{digest}.env")


def _infiniband_present() -> bool:
    return os.path.exists(INFINIBAND_DEVICE)


def rank_argv(
    spec: ContainerLaunch,
    env_file: StrPath,
    python_args: Sequence[str] = (),
    *,
    working_dir: StrPath | None = None,
) -> list[str]:
    """``apptainer exec ... IMAGE python *python_args`` for one rank.

    Parameters
    ----------
    spec : ContainerLaunch
    env_file : str or os.PathLike
        The rendered :func:`render_env_file` (read by Apptainer on the host).
    python_args : sequence of str
        Appended verbatim after the image's Python (e.g. ``["-u", "-m", "pkg.train"]``).
    working_dir : str or os.PathLike, optional
        Bound and used as the container's working directory (``--pwd``); default
        ``spec.project_dir``.

    Examples
    --------
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    >>> rank_argv(spec, "/w/a.env", ["-u", "x.py"], working_dir="/w")
    ... # doctest: +NORMALIZE_WHITESPACE
    ['apptainer', 'exec', '--nv', '--cleanenv', '--env-file', '/w/a.env', '--bind', '/p:/p',
     '--bind', '/w', '--pwd', '/w', '/i.sif', 'python', '-u', 'x.py']
    """
    env_path = _path(env_file, "env_file", bind=False)
    if "," in env_path or '"' in env_path:
        raise ValueError(f"env_file={env_path!r}: --env-file is a comma-separated list (CSV)")
    work = _path(working_dir if working_dir is not None else spec.project_dir, "working_dir")
    argv = ["apptainer", "exec"]
    argv += ["--nv"] if spec.nv else ["--rocm"] if spec.rocm else []
    argv += ["--cleanenv", "--env-file", env_path]
    if spec.no_eval:
        argv.append("--no-eval")
    project = spec.project_dir
    argv += ["--bind", f"{project}:{project}"]
    if work != project and not work.startswith(project.rstrip("/") + "/"):
        argv += ["--bind", work]
    for bind in spec.binds:
        argv += ["--bind", bind.spec]
    infiniband = _infiniband_present() if spec.infiniband is None else spec.infiniband
    if infiniband:
        argv += ["--bind", INFINIBAND_DEVICE]
    argv += [*spec.extra_args, "--pwd", work, spec.image, spec.python]
    return argv + [_plain_text(a, "python_args item", allow_newline=True) for a in python_args]


def rank_command(
    spec: ContainerLaunch, env_file: StrPath, *, working_dir: StrPath | None = None
) -> str:
    """:func:`rank_argv` without Python arguments as one shell-quoted string: submitit's
    ``python`` (it appends ``-u -m submitit.core._submit FOLDER``).

    Examples
    --------
    >>> spec = ContainerLaunch(image="/my images/i.sif", project_dir="/p", nv=False,
    ...                        infiniband=False)
    >>> rank_command(spec, "/p/a.env")
    "apptainer exec --cleanenv --env-file /p/a.env --bind /p:/p --pwd /p '/my images/i.sif' python"
    """
    return shlex.join(rank_argv(spec, env_file, (), working_dir=working_dir))


def srun_argv(
    spec: ContainerLaunch,
    env_file: StrPath,
    python_args: Sequence[str],
    *,
    ntasks_per_node: int,
    cpus_per_task: int | None = None,
    working_dir: StrPath | None = None,
) -> list[str]:
    """``srun --kill-on-bad-exit=1 --ntasks-per-node=N [--cpus-per-task=C]`` + :func:`rank_argv`.

    ``--kill-on-bad-exit=1``: one dead rank would leave the others stuck in a collective.
    """
    argv = ["srun", "--kill-on-bad-exit=1", f"--ntasks-per-node={int(ntasks_per_node)}"]
    if cpus_per_task is not None:
        argv.append(f"--cpus-per-task={int(cpus_per_task)}")
    return argv + rank_argv(spec, env_file, python_args, working_dir=working_dir)


def setup_lines(
    spec: ContainerLaunch, *, env_file: StrPath, env_text: str, heredoc: bool = False
) -> list[str]:
    """Batch-script lines (host side, before srun): export the job's ``MUSHIN_MASTER_PORT``
    and write ``env_text`` to ``env_file`` atomically.

    The text travels base64-encoded, so the lines contain no ``${`` (which Hydra/OmegaConf
    would read as an interpolation); ``heredoc=True`` writes it verbatim instead, for
    hand-written batch scripts.

    Examples
    --------
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p")
    >>> lines = setup_lines(spec, env_file="/p/.mushin-box/a.env", env_text="A=1\\n")
    >>> lines[1]
    'export MUSHIN_MASTER_PORT=$(( 15000 + SLURM_JOB_ID % 10000 ))'
    >>> "base64 -d" in lines[2] and "${" not in "".join(lines)
    True
    """
    path = _path(env_file, "env_file", bind=False)
    tmp = shlex.quote(path + ".partial.") + "$SLURM_JOB_ID.$$"
    digest = hashlib.sha256(env_text.encode("utf-8")).hexdigest()[:12]
    lines = [f"# mushin-box rank wrapper: every rank's env file (sha256 {digest}...)"]
    if (port := spec.master_port.setup_line()) is not None:
        lines.append(port)
    if heredoc:
        end = f"MUSHIN_ENV_{digest}"
        write, body = f"cat > {tmp} <<'{end}'", f"\n{env_text}{end}"
    else:
        blob = base64.b64encode(env_text.encode("utf-8")).decode("ascii")
        write, body = f"printf %s {blob} | base64 -d > {tmp}", ""
    fail = shlex.quote(f"mushin-box: could not write {path}")
    lines.append(
        f"mkdir -p -- {shlex.quote(os.path.dirname(path))} && {write} && mv -f -- {tmp} "
        f"{shlex.quote(path)} || {{ echo {fail} >&2; exit 1; }}{body}"
    )
    return lines


def container_launcher_fields(
    spec: ContainerLaunch,
    *,
    working_dir: StrPath,
    run_id: str | None = None,
    sif_sha256: str | None = None,
) -> dict[str, Any]:
    """``hydra/launcher=mushin_slurm`` fields that run every rank in the image.

    Returns
    -------
    dict
        ``python`` (submitit's python command: :func:`rank_command`), ``setup`` (the
        :func:`setup_lines`, to put before any user setup) and ``srun_args``
        (``["--kill-on-bad-exit=1"]``).

    Examples
    --------
    >>> spec = ContainerLaunch(image="/i.sif", project_dir="/p", infiniband=False)
    >>> fields = container_launcher_fields(spec, working_dir="/p")
    >>> fields["python"].startswith("apptainer exec --nv --cleanenv --env-file /p/.mushin-box/")
    True
    >>> fields["srun_args"]
    ['--kill-on-bad-exit=1']
    """
    text = render_env_file(spec, run_id=run_id, sif_sha256=sif_sha256)
    env_file = env_file_path(working_dir, text)
    return {
        "python": rank_command(spec, env_file, working_dir=working_dir),
        "setup": setup_lines(spec, env_file=env_file, env_text=text),
        "srun_args": ["--kill-on-bad-exit=1"],
    }


def render_sbatch_fragment(
    spec: ContainerLaunch,
    *,
    working_dir: StrPath,
    python_args: Sequence[str],
    ntasks_per_node: int,
    run_id: str | None = None,
    sif_sha256: str | None = None,
) -> str:
    """The part of ``job.sbatch`` that starts the ranks (notes §7.1): setup lines, then
    ``srun ... apptainer exec ...`` with ``--cpus-per-task="$SLURM_CPUS_PER_TASK"``."""
    text = render_env_file(spec, run_id=run_id, sif_sha256=sif_sha256)
    env_file = env_file_path(working_dir, text)
    argv = srun_argv(spec, env_file, python_args, ntasks_per_node=ntasks_per_node,
                     working_dir=working_dir)  # fmt: skip
    srun, rest = argv[:3], argv[5:]  # drop "apptainer exec"
    image_at = len(rest) - len(python_args) - 2
    head = " ".join(srun) + ' --cpus-per-task="$SLURM_CPUS_PER_TASK" \\'
    setup = setup_lines(spec, env_file=env_file, env_text=text, heredoc=True)
    out = [*setup, head, "  apptainer exec \\"]
    i = 0
    while i < image_at:  # one option (with its value) per line
        takes_value = rest[i] in ("--env-file", "--bind", "--pwd")
        words = rest[i : i + 1 + takes_value]
        out.append("    " + shlex.join(words) + " \\")
        i += len(words)
    out.append(f"    {shlex.quote(spec.image)} \\")
    out.append("    " + shlex.join(rest[image_at + 1 :]))
    return "\n".join(out) + "\n"
