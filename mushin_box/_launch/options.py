# SPDX-License-Identifier: MIT
"""The scheduler settings of a launch, each with its source (a flag, else the profile,
else a default), and the checks that need no experiment: nothing here loads Hydra, torch
or the experiment, so contradicting flags are refused first.

Examples
--------
>>> opts = resolve_options({"partition": "gpu", "time": 90}, None, default_name="exp", cwd="/")
>>> opts.slurm.partition, opts.slurm.timeout_min, opts.slurm.sources["timeout_min"]
('gpu', 90, '--time')
>>> opts.slurm.sources["name"], opts.slurm.name
('default', 'exp')
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.targets import public
from mushin_box._launch.profiles import Profile, check_user_sbatch_option, load_profile
from mushin_box._slurm.config import SETTING_FIELDS, SlurmSettings
from mushin_box._slurm.grammar import memory_fields

#: the flags (``resolve_options``' keys) that set a scheduler setting
SCHEDULER_FLAGS = tuple(
    f.metadata["flag"].removeprefix("--").replace("-", "_")
    for f in SETTING_FIELDS
    if f.metadata["flag"]
)
#: the flags that only a SLURM job reads
_SLURM_ONLY = (*SCHEDULER_FLAGS, "mem_gb", "bind", "image_python")


@public
class OptionError(MushinBoxError, ValueError):
    """Flags (or a profile) that cannot work together; the message names the fix."""


@attrs.frozen
class LaunchOptions:
    """What the flags and the profile say; ``explicit``: the SLURM-only flags given."""

    slurm: SlurmSettings
    image: str | None
    binds: tuple[str, ...]
    image_python: str
    explicit: tuple[str, ...]
    profile: Profile | None


def experiment_name(spec: str) -> str:
    """The default SLURM job name of an experiment: its file or module name, and the
    object's name when one is given (``exp.py:Big`` -> ``exp-Big``)."""
    target, _, name = spec.partition(":")
    stem = Path(target).stem if target.endswith(".py") or os.sep in target else target
    stem = stem.rsplit(".", 1)[-1] if not target.endswith(".py") else stem
    return f"{stem}-{name}" if name else stem


def _sbatch_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``--sbatch KEY=VALUE`` pairs as a dict, each checked as every sbatch option is."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not key:
            raise OptionError(f"--sbatch {pair!r}: give KEY=VALUE (or KEY for a flag option)")
        options[key] = value if eq else True
        try:
            check_user_sbatch_option(key, options[key], where=f"--sbatch {pair!r}", mem="--mem")
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    return options


def resolve_options(
    flags: Mapping[str, Any],
    profile: str | None,
    *,
    default_name: str,
    cwd: str | os.PathLike[str] | None = None,
) -> LaunchOptions:
    """Merge the flags (``launch``'s parsed names; None: not given) over the profile over
    the defaults; other keys are not read."""
    try:
        prof = load_profile(profile, cwd)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    given = {k: v for k, v in flags.items() if v is not None and v != [] and v != ()}
    pv = dict(prof.values) if prof is not None else {}

    def from_profile(key: str) -> str:  # the file that set it, not every file read
        return prof.source_of(key) if prof is not None else "profile"

    slurm = SlurmSettings()
    for f in SETTING_FIELDS:  # the memory and the sbatch table below: several flags each
        flag = f.metadata["flag"]
        if not flag or f.name in ("mem_gb", "additional_parameters"):
            continue
        key = flag.removeprefix("--").replace("-", "_")  # the flag's, and the profile's
        if key in given:
            slurm = slurm.merged({f.name: given[key]}, flag)
        elif pv.get(key) is not None:
            slurm = slurm.merged({f.name: pv[key]}, from_profile(key))
        elif (default := default_name if f.name == "name" else f.metadata["default"]) is not None:
            slurm = slurm.merged({f.name: default}, "default")

    if "mem" in given and "mem_gb" in given:
        raise OptionError("--mem and --mem-gb both set the memory per node: keep --mem")
    for flag_key, source in (("mem", "--mem"), ("mem_gb", "--mem-gb"), ("", from_profile("mem"))):
        if flag_key in given or (not flag_key and "mem" in pv):
            mb = given[flag_key] * (1024 if flag_key == "mem_gb" else 1) if flag_key else pv["mem"]
            slurm = slurm.merged(memory_fields(int(mb)), source)
            break
    slurm = slurm.merged({"additional_parameters": pv.get("sbatch") or {}}, from_profile("sbatch"))
    sbatch = _sbatch_options(given.get("sbatch", []))
    slurm = slurm.merged({"additional_parameters": sbatch}, "--sbatch")
    if not slurm.additional_parameters:
        slurm = attrs.evolve(slurm, additional_parameters=None)

    sources = dict(slurm.sources)
    both = {**pv, **given}
    chosen = {k: both[k] for k in ("image", "image_python") if k in both}
    for key in chosen:
        sources[key] = f"--{key.replace('_', '-')}" if key in given else from_profile(key)
    binds = (*pv.get("bind", ()), *given.get("bind", ()))
    if binds:
        sources["binds"] = " + ".join(
            s for s, on in ((from_profile("bind"), "bind" in pv), ("--bind", "bind" in given)) if on
        )
    return LaunchOptions(
        slurm=attrs.evolve(slurm, sources=sources),
        image=chosen.get("image"),
        binds=binds,
        image_python=chosen.get("image_python") or "python",
        explicit=tuple(f"--{k.replace('_', '-')}" for k in _SLURM_ONLY if k in given),
        profile=prof,
    )


def check_where(
    opts: LaunchOptions,
    *,
    local: bool,
    why: str,
    nodes: int,
    image_flag: bool,
    detach: bool,
) -> None:
    """Refuse what the chosen place cannot run, before the experiment is imported: here,
    SLURM flags given are refused, not ignored (a profile's are unused)."""
    if local:
        if nodes > 1:
            raise OptionError(
                f"--nodes {nodes} needs SLURM ({why}): run on a cluster's login node, or use "
                "--nodes 1"
            )
        if image_flag:
            raise OptionError(
                f"--image runs SLURM ranks in the image; here there is no SLURM ({why}). Use "
                "`mushin-box smoke EXP --image IMAGE` for a local run inside the image"
            )
        if detach:
            raise OptionError(
                "--detach needs SLURM (its jobs outlive this shell); a local run ends with "
                "it: run it under nohup or tmux, or drop --detach"
            )
        if opts.explicit:
            raise OptionError(
                f"{', '.join(opts.explicit)} configure{'s' if len(opts.explicit) == 1 else ''}"
                f" a SLURM job, but this launch runs here ({why}): drop "
                f"{'it' if len(opts.explicit) == 1 else 'them'}, or submit with --slurm"
            )
        return
    if opts.image is None and (opts.binds or opts.image_python != "python"):
        raise OptionError("--bind and --image-python configure the image: pass --image too")
