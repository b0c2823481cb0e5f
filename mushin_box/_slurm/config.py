# SPDX-License-Identifier: MIT
"""Hydra submitit launcher configs for one-rank-per-GPU Lightning jobs on SLURM.

Pure Python: importing this module does not import torch, Lightning, submitit or Hydra.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import unicodedata
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, cast

import attrs

from mushin_box._container.launchspec import ContainerLaunch
from mushin_box._container.preflight import PreflightWarning
from mushin_box._container.preflight import preflight as check_image
from mushin_box._container.rankwrap import container_launcher_fields
from mushin_box._core.targets import public
from mushin_box._slurm.probe import nv_without_gpus
from mushin_box._slurm.torchrun import torchrun_launcher_fields

# -- validators: each takes (key, value) and returns the value to store, or raises ValueError --


def _int_from(least: int, what: str) -> Callable[[str, object], int]:
    def check(key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key} must be {what}, got {value!r} ({type(value).__name__})")
        if value < least:
            raise ValueError(f"{key} must be {what}, got {value}")
        return value

    return check


_positive_int = _int_from(1, "a positive int")
_non_negative_int = _int_from(0, "an int >= 0")


def refuse_control_characters(key: str, value: object) -> None:
    """Refuse a str holding a control character other than tab: quoted or not, a newline
    ends the ``#SBATCH`` line and the rest runs as a shell command."""
    if isinstance(value, str) and any(c != "\t" and unicodedata.category(c) == "Cc" for c in value):
        raise ValueError(
            f"{key}={value!r}: a control character (newlines, NUL and the like) cannot go "
            "into an sbatch script; remove it"
        )


def _string(key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty str, got {value!r}")
    refuse_control_characters(key, value)
    return value


def _boolean(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be a bool, got {value!r} ({type(value).__name__})")
    return value


def _string_list(key: str, value: object) -> list[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f"{key} must be a list of shell lines (str), got {value!r}")
    for line in value:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(line, str):
            raise ValueError(f"{key} must be a list of shell lines (str), got item {line!r}")
    return list(value)  # pyright: ignore[reportUnknownArgumentType]


# sbatch options that would break "one task per GPU" if forced through additional_parameters
_LAYOUT_OPTIONS = frozenset(
    {"nodes", "ntasks", "ntasks-per-node", "ntasks-per-gpu", "gpus", "gpus-per-node"}
    | {"gpus-per-task", "cpus-per-gpu", "gres"}
)
_SBATCH_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*\Z")
_LOGS = (
    "submitit writes each job's logs under the sweep directory, where `mushin-box logs` reads "
    "them (stderr_to_stdout=True merges the two); drop the option"
)
#: sbatch options only the kit writes, and why
_KIT_ONLY: dict[str, str] = {
    "array": (
        "the kit owns the job array (one array task per cell); drop the option, and bound how "
        "many cells run at once with array_parallelism (hydra.launcher.array_parallelism)"
    ),
    "output": _LOGS,
    "error": _LOGS,
    "open-mode": f"{_LOGS.replace('writes', 'appends (across requeues)')}",
    "signal": (
        "the host-side requeue trap's signal (B:USR2 before the time limit); set "
        "signal_delay_s instead"
    ),
}


def check_sbatch_option(option: object, value: object, *, where: str) -> None:
    """Refuse one sbatch option that a user's table may not set; ``where`` names its source
    in the message. Every source of sbatch options comes here.

    An option the kit writes from a field of its own (``partition``, ``time``, ...) would
    make a second value: the review, the GPU-hours and the requeue trap would read one and
    sbatch obey the other. So it is refused, naming the one place that sets it, and so is
    any prefix of it (sbatch reads ``--part`` as ``--partition``). ``array`` and the log
    paths are the kit's alone. ``mem`` is allowed: a size under a whole GB has no field.

    >>> check_sbatch_option("mail-type", "END", where="--sbatch 'mail-type=END'")
    >>> check_sbatch_option("time", "10:00:00", where="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x: sbatch's --time is set by --time (timeout_min= in Python): the one limit ...
    """
    if not isinstance(option, str) or not _SBATCH_KEY.match(option):
        refuse_control_characters(f"{where} key", option)
        raise ValueError(
            f"{where}: {option!r} is not an sbatch option name (letters, digits, - and _, "
            "without the leading --)"
        )
    refuse_control_characters(where, value)
    if not isinstance(value, bool | int | float | str):
        raise ValueError(
            f"{where}: an sbatch option's value is a string, a number or true (a flag "
            f"option), got {value!r}"
        )
    name = option.replace("_", "-")  # submitit writes the option so
    options = sorted({*_LAYOUT_OPTIONS, *_SET_ELSEWHERE, *_KIT_ONLY})
    # sbatch takes a prefix of an option (an option sorts before the longer ones it begins)
    owned = None if name == "mem" else next((o for o in options if o.startswith(name)), None)
    if owned is None:
        return
    said = f"{where}: sbatch's --{owned}" + (
        f" (sbatch reads --{name} as an abbreviation of it, or as ambiguous)"
        if owned != name
        else ""
    )
    if owned in _LAYOUT_OPTIONS:
        raise ValueError(
            f"{said} would override the job layout that submitit_slurm_config derives (one "
            "task per GPU); set --nodes/--gpus (nodes=/gpus_per_node= in Python) instead"
        )
    if owned in _SET_ELSEWHERE:
        raise ValueError(f"{said} is set by {_SET_ELSEWHERE[owned]}; set it there instead")
    raise ValueError(f"{said}: {_KIT_ONLY[owned]}")


#: an sbatch option's value: a string, a number, or True (a flag option)
SbatchValue = str | int | float | bool


def sbatch_options(key: str, value: object) -> dict[str, SbatchValue]:
    """A copy of a dict of sbatch options, each checked by :func:`check_sbatch_option`."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{key} must be a dict of sbatch options, got {value!r}")
    options: dict[str, SbatchValue] = {}
    for option, option_value in value.items():  # pyright: ignore[reportUnknownVariableType]
        check_sbatch_option(option, option_value, where=f"{key}[{option!r}]")
        options[option] = option_value
    return options


def _memory_gb(key: str, value: object) -> int:
    # the launcher declares mem_gb an int and OmegaConf rejects any float there (even 2.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a positive number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} must be a positive number, got {value!r}")
    if value != int(value):
        raise ValueError(
            f"{key}={value!r}: the submitit launcher declares mem_gb as an int; "
            f"round it, or give mem_per_cpu='{math.ceil(value * 1024)}M' instead"
        )
    return int(value)


def _gres(key: str, value: object) -> str:
    gres = _string(key, value)
    if "gpu" in gres.lower():
        raise ValueError(
            f"{key}={gres!r} requests GPUs a second time; GPUs come from gpus_per_node= "
            f"(one task per GPU), so drop the gpu part of {key}"
        )
    return gres


_Validator = Callable[[str, object], Any]
# what a launch profile's value is, for the fields a profile sets
_STR, _TIME, _INT = "a string", "minutes or a SLURM time such as '2:00:00'", "a positive integer"
_CELLS = "a positive integer: the most cells of a sweep that run at once"
_TABLE = "a table of sbatch options, e.g. {mail-type = 'END'}"


def _setting(
    check: _Validator | None,
    *,
    flag: str | None = None,
    sbatch: str | None = None,
    profile: str | None = None,
    executor: str | None = None,
    launcher: bool = False,
    default: int | None = None,
) -> Any:
    """A field of :class:`SlurmSettings` with its metadata: ``check`` (None: the launcher's),
    ``profile`` (the value's description; the key is ``flag`` without ``--``; None: no
    key), submitit ``executor`` parameter (default: ``sbatch`` with ``_``)."""
    if executor is None and sbatch:
        executor = sbatch.replace("-", "_")
    meta = {"check": check, "flag": flag, "sbatch": sbatch, "profile": profile}
    meta |= {"executor": executor, "launcher": launcher, "default": default}
    return attrs.field(default=None, metadata=meta, kw_only=True)


@attrs.frozen
class SlurmSettings:
    """A launch's scheduler settings (``hydra.launcher`` fields besides the topology and
    the image's), each with where it came from.

    Flags, profiles, overrides, :func:`submitit_slurm_config` and the launcher all read a
    field's metadata (``_setting``) from here. ``sources`` maps a field (or
    ``additional_parameters.OPTION``) to its source (``--flag``, ``profile NAME (file)``,
    ...). None is "not set": the launcher's default applies.

    >>> s = SlurmSettings().merged({"partition": "gpu"}, "--partition")
    >>> s.given(), s.sources
    ({'partition': 'gpu'}, {'partition': '--partition'})
    >>> s.merged({"additional_parameters": {"mail-type": "END"}}, "--sbatch").sources
    {'partition': '--partition', 'additional_parameters.mail-type': '--sbatch'}
    """

    partition: str | None = _setting(_string, flag="--partition", sbatch="partition", profile=_STR)
    account: str | None = _setting(_string, flag="--account", sbatch="account", profile=_STR)
    qos: str | None = _setting(_string, flag="--qos", sbatch="qos", profile=_STR)
    constraint: str | None = _setting(
        _string, flag="--constraint", sbatch="constraint", profile=_STR
    )
    exclude: str | None = _setting(_string, flag="--exclude", sbatch="exclude", profile=_STR)
    comment: str | None = _setting(_string, sbatch="comment")
    name: str | None = _setting(_string, flag="--job-name", sbatch="job-name")
    timeout_min: int | None = _setting(
        _positive_int, flag="--time", sbatch="time", profile=_TIME, default=60
    )
    cpus_per_task: int | None = _setting(
        _positive_int, flag="--cpus-per-task", sbatch="cpus-per-task", profile=_INT, default=1
    )
    mem_gb: int | None = _setting(_memory_gb, flag="--mem", profile="a SLURM size such as '64G'")
    mem_per_cpu: str | None = _setting(_string, sbatch="mem-per-cpu")
    mem_per_gpu: str | None = _setting(_string, sbatch="mem-per-gpu")
    array_parallelism: int | None = _setting(
        _positive_int, flag="--max-parallel", profile=_CELLS, executor="array_parallelism"
    )
    additional_parameters: Mapping[str, Any] | None = _setting(
        sbatch_options, flag="--sbatch", profile=_TABLE
    )
    submitit_folder: str | None = _setting(_string)
    stderr_to_stdout: bool | None = _setting(_boolean, executor="stderr_to_stdout")
    gres: str | None = _setting(_gres, executor="gres")
    signal_delay_s: int | None = _setting(_non_negative_int, executor="signal_delay_s")
    max_num_timeout: int | None = _setting(_non_negative_int)
    setup: Sequence[str] | None = _setting(_string_list)
    # mushin_slurm's own fields (those without a check: the launcher checks them)
    requeue_on: Sequence[str] | None = _setting(None, launcher=True)
    max_requeues: int | None = _setting(_non_negative_int, launcher=True)
    rank_signal: str | None = _setting(None, launcher=True)
    poll_interval_s: float | None = _setting(None, launcher=True)
    max_wait_s: float | None = _setting(None, launcher=True)
    max_array_tasks: int | None = _setting(_positive_int, launcher=True)
    sources: Mapping[str, str] = attrs.field(factory=dict, kw_only=True)

    def given(self, *, launcher: bool | None = None) -> dict[str, Any]:
        """The fields set, in field order; ``launcher``: only the launcher's own (True) or
        only ``submitit_slurm_config``'s (False)."""
        return {
            f.name: value
            for f in SETTING_FIELDS
            if (value := getattr(self, f.name)) is not None
            and (launcher is None or launcher == f.metadata["launcher"])
        }

    def merged(self, values: Mapping[str, Any], source: str) -> SlurmSettings:
        """These settings with ``values`` over them, each from ``source``; a table of sbatch
        options joins the one there is, option by option."""
        new, sources = dict(values), dict(self.sources)
        extra = new.get("additional_parameters")
        if table := isinstance(extra, Mapping):  # else refused, with its source, by the check
            new["additional_parameters"] = {**(self.additional_parameters or {}), **extra}
        for key in new:
            if key == "additional_parameters" and table:
                sources.update({f"{key}.{k}": source for k in extra})  # pyright: ignore[reportUnknownVariableType,reportOptionalIterable]
            else:
                sources[key] = source
        return attrs.evolve(self, **new, sources=sources)

    def source(self, key: str) -> str:
        """Where ``key``'s value came from; for the sbatch table, its options' sources."""
        extra = self.additional_parameters
        if key == "additional_parameters" and isinstance(extra, Mapping):
            named = {self.sources.get(f"additional_parameters.{k}", "") for k in extra}
            return " / ".join(sorted(s for s in named if s)) or "additional_parameters"
        return self.sources.get(key, key)


#: the fields of :class:`SlurmSettings` that are settings (not ``sources``)
SETTING_FIELDS = tuple(f for f in attrs.fields(SlurmSettings) if f.name != "sources")
#: the fields submitit_slurm_config takes, and their checks
_CHECKS: dict[str, _Validator] = {
    f.name: f.metadata["check"] for f in SETTING_FIELDS if not f.metadata["launcher"]
}


#: why a field's sbatch option must come from the field, where that is more than "one value"
_WHY_THE_FIELD = {
    "partition": ", the value the review shows",
    "name": ": one name per job, which squeue and cancel go by",
    "timeout_min": ": the one limit that the requeue trap, the GPU-hours and the review count from",
}


#: sbatch options the kit writes from one field of its own: where that value is set
_SET_ELSEWHERE = {
    f.metadata["sbatch"]: (
        f"{f.metadata['flag'] or 'hydra.launcher.' + f.name} ({f.name}= in Python)"
        f"{_WHY_THE_FIELD.get(f.name, '')}"
    )
    for f in SETTING_FIELDS
    if f.metadata["sbatch"]
}


# Keys that exist (in the launcher, in submitit or in sbatch) but must not be passed here.
_REFUSED: dict[str, str] = {
    "tasks_per_node": (
        "tasks_per_node is derived: it always equals gpus_per_node (one rank per GPU, which "
        "is what Lightning's SLURMEnvironment expects with Trainer(devices=gpus_per_node)); "
        "drop tasks_per_node and set gpus_per_node to the number of ranks per node"
    ),
    "cpus_per_gpu": (
        "cpus_per_gpu cannot be combined with cpus_per_task (sbatch rejects the pair); with "
        "one task per GPU they mean the same, so pass cpus_per_task= instead"
    ),
    "gpus_per_task": (
        "gpus_per_task binds one GPU to each task, so every rank sees a single device and "
        "Lightning's local_rank indexing breaks; GPUs come from gpus_per_node= only"
    ),
} | {
    key: f"{key} is not a field of hydra-submitit-launcher 1.2.0 (only of its unreleased main "
    "branch), so Hydra would reject it"
    for key in ("srun_args", "python")
}

#: Every key :func:`submitit_slurm_config` can return (``SlurmQueueConf``'s, less refused ones)
SLURM_LAUNCHER_KEYS: tuple[str, ...] = ("nodes", "tasks_per_node", "gpus_per_node", *_CHECKS)

_MEMORY_KEYS = ("mem_gb", "mem_per_cpu", "mem_per_gpu")


# the keys always there; a base class, not Required[], which postponed annotations hide from
# the runtime's __required_keys__
class _Layout(TypedDict):
    nodes: int
    tasks_per_node: int
    gpus_per_node: int
    cpus_per_task: int
    timeout_min: int


@public
class SubmititSlurmConfig(_Layout, total=False):
    """What :func:`submitit_slurm_config` returns: ``hydra.launcher`` values, as a dict
    (``Workflow.run(launcher_config=...)`` takes it as it is). The first five keys are
    always there; each optional one is a :class:`SlurmSettings` field, or the image's
    (``python``, ``srun_args``) or torchrun's, which only ``mushin_slurm`` reads."""

    partition: str
    account: str
    qos: str
    constraint: str
    exclude: str
    comment: str
    name: str
    mem_gb: int
    mem_per_cpu: str
    mem_per_gpu: str
    array_parallelism: int
    additional_parameters: dict[str, SbatchValue]
    submitit_folder: str
    stderr_to_stdout: bool
    gres: str
    signal_delay_s: int
    max_num_timeout: int
    setup: list[str]
    python: str
    srun_args: list[str]
    torchrun: bool
    nproc_per_node: int
    max_restarts: int
    min_nodes: int
    rank_signal: str


@public
def submitit_slurm_config(
    *,
    nodes: int,
    gpus_per_node: int,
    cpus_per_task: int = 1,
    partition: str | None = None,
    account: str | None = None,
    timeout_min: int = 60,
    mem_gb: int | float | None = None,
    image: str | os.PathLike[str] | None = None,
    binds: Sequence[str] = (),
    nv: bool | None = None,
    rocm: bool = False,
    env: Mapping[str, str | None] | None = None,
    nccl: Any = "default",
    working_dir: str | os.PathLike[str] | None = None,
    image_python: str = "python",
    preflight: bool = True,
    torchrun: bool = False,
    max_restarts: int = 0,
    min_nodes: int | None = None,
    **extra: Any,
) -> SubmititSlurmConfig:
    """A validated hydra-submitit-launcher config for a job with one rank per GPU.

    The dict holds ``hydra.launcher`` values for ``hydra/launcher=submitit_slurm`` (fields
    of hydra-submitit-launcher 1.2.0's ``SlurmQueueConf``). ``tasks_per_node`` is always
    ``gpus_per_node``, so each SLURM task is one Lightning rank: pair it with
    ``Trainer(devices=gpus_per_node, num_nodes=nodes)``.

    Parameters
    ----------
    nodes, gpus_per_node : int
        Nodes (``--nodes``) and GPUs, hence tasks, per node (``--gpus-per-node``).
    cpus_per_task : int, optional
        CPUs for each task, i.e. for each GPU (``--cpus-per-task``); default 1.
    partition, account : str, optional
        SLURM partition and account; None: the cluster's defaults.
    timeout_min : int, optional
        Wall-time limit in minutes (``--time``); default 60.
    mem_gb : int or float, optional
        Memory per node in GB (``--mem``), a whole number (the launcher declares an int).
        Excludes ``mem_per_cpu`` and ``mem_per_gpu``.
    image : str or os.PathLike, optional
        Run every rank in this Apptainer image: adds ``python``, ``srun_args`` and ``setup``
        lines, which only ``hydra/launcher=mushin_slurm`` accepts.
    binds, nv, rocm, env, nccl
        The image's binds (``src[:dst[:ro|rw]]``), ``--nv`` (default unless ``rocm``) or
        ``--rocm``, extra variables and NCCL profile; see ``ContainerLaunch``. Only with
        ``image``. ``env={NAME: None}`` forwards NAME from the submitting environment
        without writing its value; a secret-looking NAME accepts only ``None``.
    preflight : bool (default: True)
        With ``image``: check the image before anything is submitted (it exists, matches
        its manifest, runs this Python's major.minor) and pass its identity to the ranks
        (``MUSHIN_SIF_SHA256``, ...: provenance and cell fingerprints).
    working_dir : str or os.PathLike, optional
        Bound, the ranks' working directory, and where the env file is written (default:
        the current directory). Only with ``image``.
    image_python : str (default: "python")
        The Python command inside the image. Only with ``image``.
    torchrun, max_restarts, min_nodes
        One torchrun agent per node (``mushin_slurm`` only), holding the node's GPUs and
        ``gpus_per_node x cpus_per_task`` CPUs, whose ``gpus_per_node`` workers restart up
        to ``max_restarts`` times; ``min_nodes``: elastic ``--nnodes min_nodes:nodes``
        (``docs/elastic.md``).
    **extra
        Any other optional ``SlurmQueueConf`` field (``qos``, ``constraint``, ``gres`` (not
        GPUs), ``mem_per_cpu``, ``setup``, ``additional_parameters``, ...). None values are
        omitted.

    Returns
    -------
    SubmititSlurmConfig
        ``nodes``, ``tasks_per_node``, ``gpus_per_node``, ``cpus_per_task`` and
        ``timeout_min``, then every optional key that is not None (lists and dicts copied).
        With ``image``: also ``python``, ``srun_args`` and ``setup`` (the container's first).

    Raises
    ------
    ValueError
        For an explicit ``tasks_per_node`` (it is derived), an unknown key (with the closest
        valid one), a value of the wrong type or range (bools are not ints),
        ``cpus_per_gpu`` or ``gpus_per_task`` (they break one rank per GPU), GPUs in
        ``gres``, an ``additional_parameters`` option the kit sets itself
        (:func:`check_sbatch_option`), or more than one memory option.

    Examples
    --------
    >>> from mushin_box._slurm.config import submitit_slurm_config
    >>> cfg = submitit_slurm_config(nodes=2, gpus_per_node=4, partition="gpu", timeout_min=30)
    >>> cfg  # doctest: +NORMALIZE_WHITESPACE
    {'nodes': 2, 'tasks_per_node': 4, 'gpus_per_node': 4, 'cpus_per_task': 1,
     'timeout_min': 30, 'partition': 'gpu'}

    As Hydra overrides (use a list's Hydra syntax for ``setup``):

    >>> [f"hydra.launcher.{key}={value}" for key, value in cfg.items()][:2]
    ['hydra.launcher.nodes=2', 'hydra.launcher.tasks_per_node=4']

    >>> submitit_slurm_config(nodes=1, gpus_per_node=2, tasks_per_node=1)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: tasks_per_node is derived: it always equals gpus_per_node ...

    Every rank in an Apptainer image (for ``hydra/launcher=mushin_slurm``):

    >>> cfg = submitit_slurm_config(nodes=2, gpus_per_node=4, image="/img/train.sif",
    ...                             working_dir="/runs", binds=["/data:/data:ro"],
    ...                             preflight=False)  # no image here to check
    >>> cfg["python"].split()[:4], cfg["srun_args"]
    (['apptainer', 'exec', '--nv', '--cleanenv'], ['--kill-on-bad-exit=1'])

    One torchrun agent per node, each starting 4 workers:

    >>> cfg = submitit_slurm_config(nodes=2, gpus_per_node=4, torchrun=True, max_restarts=1)
    >>> cfg["tasks_per_node"], cfg["nproc_per_node"], cfg["max_restarts"]
    (1, 4, 1)
    """
    for key in extra:
        if key in _REFUSED:
            raise ValueError(_REFUSED[key])
        if key not in _CHECKS:
            accepted = [k for k in SLURM_LAUNCHER_KEYS if k != "tasks_per_node"]
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(
                f"unknown submitit launcher key {key!r}; {hint}valid keys: "
                f"{', '.join(sorted(accepted))}"
            )

    config: dict[str, Any] = {
        "nodes": _positive_int("nodes", nodes),
        "tasks_per_node": _positive_int("gpus_per_node", gpus_per_node),
        "gpus_per_node": gpus_per_node,
        "cpus_per_task": _positive_int("cpus_per_task", cpus_per_task),
        "timeout_min": _positive_int("timeout_min", timeout_min),
    }
    named = {"partition": partition, "account": account, "mem_gb": mem_gb}
    for key, value in {**named, **extra}.items():
        if value is not None:
            config[key] = _CHECKS[key](key, value)

    container = {
        "binds": bool(binds),
        "nv": nv is not None,
        "rocm": bool(rocm),
        "env": bool(env),
        "nccl": nccl != "default",
        "working_dir": working_dir is not None,
        "image_python": image_python != "python",
    }
    if image is None and any(container.values()):
        given = ", ".join(k for k, v in container.items() if v)
        raise ValueError(f"{given} configure the rank container: pass image= too")
    if image is not None:
        spec = ContainerLaunch(
            image=os.fspath(image),
            binds=list(binds),
            nv=(not rocm) if nv is None else nv,
            rocm=rocm,
            env=env,
            nccl=nccl,
            python=image_python,
        )
        identity = check_image(os.fspath(image)).identity if preflight else None
        # pre-flight of the nodes too: --nv where they have no GPU
        if preflight and spec.nv and (wasted := nv_without_gpus(config.get("partition"))):
            warnings.warn(wasted, PreflightWarning, stacklevel=2)
        fields = container_launcher_fields(
            spec, working_dir=working_dir or os.getcwd(), identity=identity
        )
        config["python"] = fields["python"]
        config["srun_args"] = list(fields["srun_args"])
        config["setup"] = list(fields["setup"]) + list(config.get("setup", []))

    if torchrun is not True and (torchrun is not False or max_restarts or min_nodes):
        raise ValueError("max_restarts and min_nodes configure torchrun: pass torchrun=True")
    if torchrun:
        config = torchrun_launcher_fields(config, max_restarts=max_restarts, min_nodes=min_nodes)
    memory = [key for key in _MEMORY_KEYS if key in config]
    if "mem" in config.get("additional_parameters", {}):
        memory.append("additional_parameters['mem']")
    if len(memory) > 1:
        raise ValueError(
            f"{' and '.join(memory)} are mutually exclusive (sbatch accepts one of --mem, "
            f"--mem-per-cpu, --mem-per-gpu); keep one"
        )
    return cast(SubmititSlurmConfig, config)  # every key is one of its own, checked above
