# SPDX-License-Identifier: MIT
"""The scheduler settings of a launch, each with its source (a flag, else the profile,
else a default), and the checks that need no experiment: nothing here loads Hydra, torch
or the experiment, so contradicting flags are refused first.

Launch profiles (docs/cli.md) are tables of ``launch`` flags (names without ``--``): the
project's, in the nearest ``pyproject.toml`` (``[tool.mushin-box.profiles.NAME]``) or
``mushin-box.toml`` (``[profiles.NAME]``) at or above the working directory (a profile in
both is an error), over the user's own key by key. ``--profile NAME`` applies one, else
``default`` if there is one; every value is checked in one line naming file, profile and key.

Examples
--------
>>> opts = resolve_options({"partition": "gpu", "time": 90}, None, default_name="exp", cwd="/")
>>> opts.slurm.partition, opts.slurm.timeout_min, opts.slurm.sources["timeout_min"]
('gpu', 90, '--time')
>>> opts.slurm.sources["name"], opts.slurm.name
('default', 'exp')
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import PROFILES_FILE, PROJECT_FILE
from mushin_box._core.redact import toml_problem
from mushin_box._core.targets import public
from mushin_box._slurm.config import SETTING_FIELDS, SlurmSettings, check_sbatch_option
from mushin_box._slurm.grammar import memory_fields, parse_slurm_memory, parse_slurm_time

_FIELDS = {f.metadata["flag"][2:]: f for f in SETTING_FIELDS if f.metadata["profile"]}
#: profile keys (launch flags without ``--``) and what each must be: the scheduler's, from
#: SlurmSettings' fields, then the image's
PROFILE_KEYS: Mapping[str, str] = {key: f.metadata["profile"] for key, f in _FIELDS.items()} | {
    "image": "a path to a .sif",
    "bind": "a list of SRC[:DST[:ro]] strings",
    "image-python": "a command",
}
# names people reach for (the launcher's field, a plural; a key with _ for - is close enough
# for difflib): pointed at the profile key
_ALIASES = {f.name: key for key, f in _FIELDS.items()} | {
    "binds": "bind",
    "cpus": "cpus-per-task",
    "mem-gb": "mem",
}


@attrs.frozen
class Profile:
    """A loaded profile: ``values`` under the launch's names (``image`` absolute, ``time``
    in minutes, ``mem`` in megabytes), and the file each came from (``origins``)."""

    name: str
    path: str
    values: Mapping[str, Any]
    origins: Mapping[str, str] = attrs.field(factory=dict)


def find_profile_files(cwd: str | os.PathLike[str] | None = None) -> list[Path]:
    """The project's profile files, pyproject.toml first (none: no project)."""
    try:
        directory = Path(cwd if cwd is not None else os.getcwd()).resolve()
    except OSError:  # the working directory was removed: no project
        return []
    for d in (directory, *directory.parents):
        found = [d / name for name in (PROJECT_FILE, PROFILES_FILE) if (d / name).is_file()]
        if found:
            return found
    return []


def user_profile_file() -> Path:
    """The user's profile file: ``$XDG_CONFIG_HOME/mushin-box/profiles.toml`` (XDG's
    default ``~/.config`` when the variable is unset or not absolute).

    >>> user_profile_file().parts[-2:]
    ('mushin-box', 'profiles.toml')
    """
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return root / "mushin-box" / "profiles.toml"


def _tables(path: Path) -> dict[str, Any]:
    """The profile tables of one file ({} when it has none)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ValueError(f"{path} cannot be read ({toml_problem(exc)}); fix the file") from None
    if path.name == PROJECT_FILE:
        tool = data.get("tool")
        data = tool.get("mushin-box", {}) if isinstance(tool, dict) else {}
        where = f"{path}: [tool.mushin-box.profiles]"
    else:  # mushin-box.toml, or the user's profiles.toml
        where = f"{path}: [profiles]"
    profiles = data.get("profiles", {}) if isinstance(data, dict) else {}
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        raise ValueError(
            f"{where} must hold one table per profile, e.g. [tool.mushin-box.profiles.gpu] "
            "(pyproject.toml) or [profiles.gpu] (mushin-box.toml)"
        )
    return profiles


def load_profile(name: str | None, cwd: str | os.PathLike[str] | None = None) -> Profile | None:
    """The profile ``name`` of the project at ``cwd`` (``None``: the ``default`` profile if
    there is one); a one-line ValueError for a bad file, profile, key or value.

    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "mushin-box.toml").write_text('[profiles.default]\\ntime = "1:30:00"\\n')
    >>> load_profile(None, d).values
    {'time': 90}
    >>> load_profile("gpu", d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --profile gpu: no such profile in .../mushin-box.toml (profiles: default)
    """
    files = find_profile_files(cwd)
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in files:
        for profile, table in _tables(path).items():
            if profile in found:
                raise ValueError(
                    f"profile {profile!r} is defined in both {found[profile][0]} and {path}: "
                    "keep one"
                )
            found[profile] = (path, table)
    user = user_profile_file()
    mine = _tables(user) if user.is_file() else {}
    wanted = "default" if name is None else name
    if wanted not in found and wanted not in mine:
        if name is None:
            return None
        where = " and ".join(map(str, [*files, *([user] if mine else [])]))
        where = where or f"no {PROJECT_FILE} or {PROFILES_FILE} found, and no {user}"
        names = sorted({*found, *mine})
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        listed = ", ".join(names) or "none"
        raise ValueError(f"--profile {name}: no such profile in {where} ({hint}profiles: {listed})")
    # the user's first: the project's keys win where both set one
    layers = [(user, mine[wanted])] if wanted in mine else []
    layers += [found[wanted]] if wanted in found else []
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for path, table in layers:
        values.update(checked := _check(wanted, path, table))
        origins.update(dict.fromkeys(checked, _shown(path)))
    shown = " + ".join(_shown(path) for path, _ in reversed(layers))
    return Profile(wanted, shown, values, origins)


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):
        return str(path)


def _check(name: str, path: Path, table: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = str(raw_key)
        where = f"{path}: profile {name}: {key}"
        if key not in PROFILE_KEYS:
            close = _ALIASES.get(key) or next(
                iter(difflib.get_close_matches(key, list(PROFILE_KEYS), n=1)), None
            )
            hint = f"did you mean {close!r}? " if close else ""
            raise ValueError(
                f"{path}: profile {name}: unknown key {key!r}; {hint}valid keys: "
                f"{', '.join(PROFILE_KEYS)}"
            )
        values[key.replace("-", "_")] = _value(key, value, where, path.parent)
    return values


def check_user_sbatch_option(option: str, value: Any, *, where: str, mem: str) -> None:
    """Check an sbatch option a user wrote as every sbatch option is checked, and refuse
    ``mem``, which the launch sets from ``mem`` (named in the error)."""
    check_sbatch_option(option, value, where=where)
    if option.replace("_", "-") == "mem":
        raise ValueError(f"{where}: sbatch's --mem is set by {mem}; use that")


def _value(key: str, value: Any, where: str, base: Path) -> Any:
    wrong = ValueError(f"{where} must be {PROFILE_KEYS[key]}, got {value!r}")
    if key == "time":
        try:
            return parse_slurm_time(value, what=where)
        except ValueError:
            raise wrong from None
    if key == "mem":
        if not isinstance(value, str):  # a bare number would mean megabytes: say the unit
            raise ValueError(f"{where} must be a string with a unit, e.g. '64G'; got {value!r}")
        try:
            return parse_slurm_memory(value, what=where)
        except ValueError:
            raise wrong from None
    if key in ("cpus-per-task", "max-parallel"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise wrong
        return value
    if key == "bind":
        binds = [value] if isinstance(value, str) else value
        if not isinstance(binds, list) or not all(isinstance(b, str) and b for b in binds):
            raise wrong
        return tuple(binds)
    if key == "sbatch":
        if not isinstance(value, dict) or not all(
            isinstance(v, str | int | bool) for v in value.values()
        ):
            raise wrong
        for option, option_value in value.items():
            check_user_sbatch_option(
                option, option_value, where=f"{where}.{option}", mem="the profile's mem key"
            )
        return dict(value)
    if not isinstance(value, str) or not value.strip():
        raise wrong
    if key == "image":
        return str((base / os.path.expanduser(value)).resolve())
    return value


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
        return f"profile {prof.name} ({prof.origins.get(key, prof.path)})" if prof else "profile"

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
    sbatch: dict[str, Any] = {}  # --sbatch KEY=VALUE, each checked as every sbatch option is
    for pair in given.get("sbatch", []):
        key, eq, value = pair.partition("=")
        key = key.strip().removeprefix("--")
        if not key:
            raise OptionError(f"--sbatch {pair!r}: give KEY=VALUE (or KEY for a flag option)")
        sbatch[key] = value if eq else True
        try:
            check_user_sbatch_option(key, sbatch[key], where=f"--sbatch {pair!r}", mem="--mem")
        except ValueError as exc:
            raise OptionError(str(exc)) from None
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
