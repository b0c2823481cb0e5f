# SPDX-License-Identifier: MIT
"""What ``reproduce`` checks before it runs anything: the cell, its secrets, code and image.

Each check writes nothing, and returns what it found or raises :class:`ReproduceError`,
one line naming the problem and the fix.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._container.launchspec import INFINIBAND_DEVICE
from mushin_box._core.errors import MushinBoxError
from mushin_box._core.layout import (
    HYDRA_CONFIG_FILE,
    HYDRA_OUTPUT_SUBDIR,
    PROVENANCE_FILE,
    SECRET_ENV_PREFIX,
    STATUS_FILE,
    read_limit,
)
from mushin_box._core.safeio import UnsafeFileError, open_regular_stat
from mushin_box._core.sidecars import loads, read_json
from mushin_box._core.targets import public
from mushin_box._core.userfile import owner_problem
from mushin_box._image.digest import image_sha256
from mushin_box._provenance.compare import record_problem
from mushin_box._provenance.env import NO_IMAGE
from mushin_box._provenance.record import git_state, task_file
from mushin_box._provenance.task import locator_problem
from mushin_box._sweep.usercode import code_identity
from mushin_box._sweepdir.manifest import is_sweep_dir


def part(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``record[key]`` when it is a mapping, else an empty one (a record read from disk).

    >>> part({"a": {"b": 1}, "c": None}, "a"), part({"c": None}, "c")
    ({'b': 1}, {})
    """
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


@public
class ReproduceError(MushinBoxError, ValueError):
    """Bad input to ``reproduce``: one line naming the problem and the fix (CLI exit 2)."""


@attrs.frozen
class Original:
    """The cell to reproduce, as its sidecars describe it."""

    cell_dir: Path
    record: Mapping[str, Any]  # as written (not split)
    provenance_sha256: str  # sha256 of the record file's bytes
    config: dict[str, Any]  # .hydra/config.yaml, unresolved (secrets are references)
    combo: Mapping[str, Any]  # the swept values

    @property
    def repro(self) -> Mapping[str, Any]:
        return self.record.get("reproducibility") or {}

    @property
    def run(self) -> Mapping[str, Any]:
        return self.record.get("run") or {}


def _own_bytes(path: Path) -> bytes:
    """A cell file that says what to run, read only when it is the user's own (else another
    user names the code), through the descriptor whose owner was checked."""
    fd, st = open_regular_stat(path)
    limit = read_limit(path.name)
    with os.fdopen(fd, "rb") as handle:
        problem = owner_problem(path, st)
        data = b"" if problem else handle.read(limit + 1)
    if problem:
        raise ReproduceError(
            f"{path} {problem}: reproduce runs only what a record of your own names (owned "
            "by you, writable by nobody else); run the cell again yourself"
        )
    if len(data) > limit:
        raise UnsafeFileError(f"over the {limit}-byte limit for this kind of file")
    return data


def read_original(cell: str | os.PathLike[str]) -> Original:
    """A completed cell with a whole record of the user's own, a saved config and ``run.task``."""
    from omegaconf import OmegaConf

    path = Path(cell)
    if not path.exists():
        raise ReproduceError(f"{cell}: no such directory; give a cell directory of a sweep")
    if not (path / STATUS_FILE).is_file():
        if path.is_dir() and is_sweep_dir(path):
            raise ReproduceError(
                f"{cell} is a sweep directory; give one of its cells (`mushin-box status {cell}` "
                "lists them)"
            )
        raise ReproduceError(f"{cell}: not a cell directory (no {STATUS_FILE}); give a cell")
    path = path.resolve()
    status = read_json(path / STATUS_FILE)
    if not isinstance(status, dict) or not isinstance(status.get("combo"), dict):
        raise ReproduceError(
            f"{path / STATUS_FILE} is unreadable; run the cell again (resume=True) to rewrite it"
        )
    state, error, reason = status.get("status"), status.get("error"), status.get("reason")
    if isinstance(error, Mapping) and error.get("message"):
        reason = f"{str(error.get('type') or 'error')}: {str(error['message'])[:200]}"
    if state != "completed":
        raise ReproduceError(
            f"{path.name} is {state}{f': {reason}' if reason else ''}; only a completed cell can "
            "be reproduced: wait for it, or run it to completion (resume=True) first"
        )
    try:
        data = _own_bytes(path / PROVENANCE_FILE)
        record = loads(data)
    except FileNotFoundError:
        raise ReproduceError(
            f"{path.name} has no {PROVENANCE_FILE}; run the cell again to record it"
        ) from None
    except ReproduceError:
        raise
    except (OSError, ValueError) as exc:
        raise ReproduceError(
            f"{path / PROVENANCE_FILE} is unreadable ({exc}); restore it, or run the cell again"
        ) from None
    problem = record_problem(record)
    if problem:
        raise ReproduceError(
            f"{path / PROVENANCE_FILE} is damaged ({problem}); restore it, or run the cell again"
        )
    hydra_dir = path / HYDRA_OUTPUT_SUBDIR
    try:
        config = OmegaConf.to_container(
            OmegaConf.create(_own_bytes(hydra_dir / HYDRA_CONFIG_FILE).decode())
        )
    except FileNotFoundError:
        raise ReproduceError(
            f"{path.name} has no {HYDRA_OUTPUT_SUBDIR}/{HYDRA_CONFIG_FILE} (its saved config); "
            "restore it, or run the cell again"
        ) from None
    except ReproduceError:
        raise
    except Exception as exc:  # OmegaConf/YAML errors of a damaged file
        raise ReproduceError(
            f"{hydra_dir / HYDRA_CONFIG_FILE} is unreadable ({' '.join(str(exc).split())}); "
            "restore it, or run the cell again"
        ) from None
    if not isinstance(config, dict):
        raise ReproduceError(f"{hydra_dir / HYDRA_CONFIG_FILE} is not a config mapping")
    located = part(part(record, "run"), "task")
    if not isinstance(located.get("task"), Mapping):
        raise ReproduceError(
            f"{path.name}: its record does not say where its task is defined (run.task, "
            "recorded since mushin-box 0.2); run the cell again with this version"
        )
    for what in ("task", "pre_call"):
        problem = locator_problem(located.get(what), what)
        if problem:
            raise ReproduceError(f"{path.name}: {problem}")
    return Original(
        cell_dir=path,
        record=dict(record),
        provenance_sha256=hashlib.sha256(data).hexdigest(),
        config={str(k): v for k, v in config.items()},
        combo=dict(status["combo"]),
    )


_ENV_REF = re.compile(r"\$\{oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)\s*(,)?")


def env_references(config: Any, prefix: str = "") -> list[tuple[str, str, bool]]:
    """``(config path, variable, has a default)`` of every ``${oc.env:NAME}`` in ``config``.

    >>> env_references({"db": {"password": "${oc.env:MUSHIN_SECRET_AB}"},
    ...                 "home": "${oc.env:HOME,/tmp}"})
    [('db.password', 'MUSHIN_SECRET_AB', False), ('home', 'HOME', True)]
    """
    if isinstance(config, str):
        found = _ENV_REF.finditer(config)
        return [(prefix.rstrip("."), m.group(1), m.group(2) is not None) for m in found]
    if not isinstance(config, Mapping | list):
        return []
    items = config.items() if isinstance(config, Mapping) else enumerate(config)
    return [ref for key, value in items for ref in env_references(value, f"{prefix}{key}.")]


def check_secrets(config: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """The variables the saved config reads; raise for one unset here with no default."""
    references = env_references(config)
    for path, name, has_default in references:
        if has_default or name in environ:
            continue
        if name.startswith(SECRET_ENV_PREFIX):
            raise ReproduceError(
                f"the secret {path!r} is not set: the saved config reads it from the "
                f"environment variable {name}; export {name} with the value the original "
                "run had (it is in no file)"
            )
        raise ReproduceError(
            f"{path!r} reads the environment variable {name}, which is not set; export it"
        )
    return list(dict.fromkeys(name for _, name, _ in references))


@attrs.frozen
class CodeCheck:
    """The code the re-run will run, against the code the cell ran."""

    recorded: Mapping[str, Any]  # {"git": ..., "task_sha256": ...}
    current: Mapping[str, Any]
    problems: tuple[str, ...]  # empty: the same code
    allow_dirty: bool  # run despite the problems
    #: another commit (or changes elsewhere) checked out, with the cell's code unchanged
    moved: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "same": self.same}


def git_problems(recorded: Any, current: Any) -> list[str]:
    if not isinstance(recorded, Mapping):
        return []  # the cell ran outside git: the fingerprint decides
    commit = recorded.get("commit")
    if not isinstance(current, Mapping):
        return [f"the cell ran at commit {commit}, but here its code is in no git checkout"]
    out: list[str] = []
    if commit != current.get("commit"):
        out.append(f"the cell ran at commit {commit}, but {current.get('commit')} is checked out")
    was, now = recorded.get("diff_sha256"), current.get("diff_sha256")
    if was != now:
        said = {
            (True, False): f"the tree has uncommitted changes (git diff HEAD sha256 {now}), "
            "the cell ran on a clean tree",
            (False, True): f"the cell ran with uncommitted changes (git diff HEAD sha256 {was}), "
            "the tree is clean now",
        }
        out.append(
            said.get(
                (was is None, now is None),
                f"the uncommitted changes differ (git diff HEAD sha256 {was} then, {now} now)",
            )
        )
    return out


#: a refusal names no fingerprint: written into a forged record, it would make it pass
FINGERPRINT_DIFFERS = (
    "the code fingerprint (the task's source and the user modules it reaches, read from "
    "their files) is not the recorded one"
)


def code_differs(problems: list[str], ways_back: Sequence[str] = ()) -> ReproduceError:
    """The refusal of code that is not the cell's, with the ways back to it."""
    close = "Or pass" if ways_back else "Check out the cell's code, or pass"
    return ReproduceError(
        "the code differs from the cell's: "
        + "; ".join([*problems, *ways_back])
        + f". {close} {{allow_dirty}} to run anyway (recorded)",
        arguments={"allow_dirty": True, "worktree": True},
    )


def check_code(
    original: Original,
    task: Callable[..., Any],
    pre_call: Callable[..., Any] | None,
    config: Any,
    *,
    allow_dirty: bool,
    moved: tuple[str, ...] = (),
) -> CodeCheck:
    """Compare the recorded code with the code here; refuse a difference unless
    ``allow_dirty``. ``moved`` (another commit, the cell's files): said, not refused."""
    code = original.repro.get("code") or {}
    recorded = {"git": code.get("git"), "task_sha256": code.get("task_sha256")}
    identity = code_identity(task, config=config, extra=(pre_call,))
    file = part(original.run, "experiment").get("file")  # the recorded experiment's repo
    source = Path(file) if isinstance(file, str) and Path(file).is_file() else task_file(task)
    current = {
        "git": git_state(source or Path.cwd(), include=identity.files),
        "task_sha256": identity.fingerprint,
    }
    problems = git_problems(recorded["git"], current["git"])
    same = recorded["task_sha256"] == current["task_sha256"]
    if moved and same:
        return CodeCheck(recorded, current, (), False, tuple(problems))
    if (problems or not same) and not allow_dirty:
        raise code_differs(problems + ([] if same else [FINGERPRINT_DIFFERS]))
    if not same:  # recorded in the re-run's record, which is the user's own
        problems.append(
            f"the code fingerprint (task source and the user modules it reaches) was "
            f"{recorded['task_sha256']}, here it is {current['task_sha256']}"
        )
    return CodeCheck(recorded, current, tuple(problems), allow_dirty and bool(problems))


@attrs.frozen
class ImageCheck:
    """The re-run's image (``path`` None: none), with the original's binds and Python."""

    recorded: Any  # reproducibility.image: "no image" or the identity mapping
    path: str | None
    sha256: str | None
    binds: tuple[str, ...] = ()
    python: str = "python"


def rank_argv(run: Mapping[str, Any]) -> list[str] | None:
    """The recorded ``apptainer exec ... IMAGE PYTHON`` of a rank (else submitit's python)."""
    argv = part(run, "container").get("rank_argv")
    if isinstance(argv, list) and all(isinstance(w, str) for w in argv):
        return list(argv)
    command = part(part(run, "launcher"), "config").get("python")
    if isinstance(command, str) and command.startswith("apptainer "):
        try:
            return shlex.split(command)
        except ValueError:
            return None
    return None


def recorded_container(run: Mapping[str, Any]) -> tuple[tuple[str, ...], str] | None:
    """``(the launch's binds, image python)`` of the recorded rank command, or None; not
    the project and working directories, nor InfiniBand: the re-run binds its own.

    >>> argv = ["apptainer", "exec", "--nv", "--cleanenv", "--env-file", "/w/a.env",
    ...         "--bind", "/p:/p", "--bind", "/w", "--bind", "/data:/data:ro",
    ...         "--bind", "/dev/infiniband", "--pwd", "/w", "/i.sif", "/opt/py/bin/python"]
    >>> recorded_container({"container": {"rank_argv": argv}})
    (('/data:/data:ro',), '/opt/py/bin/python')
    >>> recorded_container({}) is None
    True
    """
    argv = rank_argv(run)
    if not argv or "--pwd" not in argv:
        return None
    at = argv.index("--pwd")
    if at + 3 >= len(argv):
        return None
    work, python = argv[at + 1], argv[at + 3]
    binds = [argv[i + 1] for i in range(at) if argv[i] == "--bind" and i + 1 < at]
    binds = binds[1:]  # the project directory, always first
    if binds and binds[-1] == INFINIBAND_DEVICE:
        binds = binds[:-1]  # bound wherever it exists
    return tuple(b for b in binds if b != work), python


def _candidates(original: Original) -> list[str]:
    """Where the record says the image was, most trusted first."""
    values = [part(original.run, "image").get(key) for key in ("path", "image", "manifest")]
    out = [v.removesuffix(".manifest.json") for v in values if isinstance(v, str) and v]
    argv = part(original.run, "container").get("rank_argv")
    if isinstance(argv, list):
        out += [w for w in argv if isinstance(w, str) and w.endswith(".sif")]
    return list(dict.fromkeys(out))


def check_image(original: Original, image: str | None) -> ImageCheck:
    """The SIF to run (``image``, else the recorded one), checked against the record."""
    recorded = original.repro.get("image", NO_IMAGE)
    if recorded in (None, NO_IMAGE):
        if image is not None:
            raise ReproduceError(
                "the cell ran in no image, so its re-run runs in none: drop {image}",
                arguments={"image": image},
            )
        return ImageCheck(NO_IMAGE, None, None)
    want = recorded.get("sif_sha256") if isinstance(recorded, Mapping) else None
    if not want:
        raise ReproduceError(
            f"the cell ran in an image whose sha256 was not recorded ({recorded!r}): its "
            "image cannot be verified; run the cell again in its image, so that the ranks record it"
        )
    if image is None:
        found = [p for p in _candidates(original) if Path(p).is_file()]
        if not found:
            where = ", ".join(_candidates(original)) or "no path"
            raise ReproduceError(
                f"the cell's image (sha256 {want}) is not where it was recorded ({where}); "
                "pass {image}, a copy of it",
                arguments={"image": "SIF"},
            )
        image = found[0]
    if not Path(image).is_file():
        raise ReproduceError("{image}: no such file", arguments={"image": image})
    got = image_sha256(image)  # cached per file version: launch's pre-flight reuses it
    if got != want:
        raise ReproduceError(
            f"the image {image} has sha256 {got}, but the cell ran in sha256 {want}: "
            "pass {image}, the SIF the cell ran in",
            arguments={"image": "SIF"},
        )
    binds, python = recorded_container(original.run) or ((), "python")
    for bind in binds:
        source = bind.split(":", 1)[0]
        if not Path(source).exists():
            raise ReproduceError(
                f"the cell ran with --bind {bind}, whose source {source} does not exist "
                "here: restore it (the ranks read it) before reproducing"
            )
    return ImageCheck(recorded, str(Path(image).resolve()), got, binds, python)
