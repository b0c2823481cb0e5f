# SPDX-License-Identifier: MIT
"""``mushin-box launch``: an experiment file + ``--nodes``/``--gpus`` → a ``Workflow.run``.

The one contract of multi-node DDP is one rank per GPU, with the Trainer agreeing
(``devices == gpus per node``, ``num_nodes == nodes``). The command line says the topology
once; :func:`plan_launch` derives everything else from it: the SLURM launcher config
(:func:`~mushin_box.submitit_slurm_config`, ``tasks_per_node = gpus``, optionally every
rank in an Apptainer image) and the Trainer overrides (``++trainer.devices``,
``++trainer.num_nodes``). With no SLURM (no ``sbatch`` on PATH, or ``local=True``) the
cells run here: one node, ``gpus`` CPU ranks under HydraDDP (gloo).

The experiment is ``path/to/exp.py[:NAME]`` or ``package.module:NAME``. ``NAME`` (default:
``workflow``, else ``Config``) is either a :class:`~mushin_box.Workflow` or a hydra-zen
config with ``trainer``, ``module`` and optional ``datamodule`` nodes, which is fitted by
:func:`fit_task`. A file is imported as a module named after it (its directory first on
``sys.path``, and on ``PYTHONPATH`` for the ranks), so classes it defines are importable by
every rank.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mushin_box._core.layout import LOCK_FILE, STATUS_FILE
from mushin_box._train.resume import ResumeContext

__all__ = [
    "LaunchError",
    "LaunchPlan",
    "check_working_dir",
    "fit_task",
    "load_target",
    "plan_launch",
    "sbatch_refusal",
    "seed_pre_call",
    "user_code_error",
]

DEFAULT_NAMES = ("workflow", "Config")
_HYDRADDP_TARGETS = frozenset(
    {"mushin_box.HydraDDP", "mushin_box._ddp.HydraDDP"}
)  # 0.1 wrote the second
_TOPOLOGY_KEYS = ("trainer.devices", "trainer.num_nodes")


class LaunchError(ValueError):
    """A launch that cannot work as asked; the message names the fix."""


# ---------------------------------------------------------------------------- the task


def seed_pre_call(cfg: Any) -> None:
    """zen ``pre_call`` of a config-only experiment: seed every rank from ``cfg.seed``
    before the model is built (``seed_everything_per_rank``), when the config has one."""
    seed = cfg.get("seed") if hasattr(cfg, "get") else getattr(cfg, "seed", None)
    if seed is not None:
        from mushin_box._train.seeding import seed_everything_per_rank

        seed_everything_per_rank(int(seed))


def fit_task(
    trainer: Any, module: Any, mushin_resume: ResumeContext, datamodule: Any = None
) -> dict[str, float]:
    """The task of a config-only experiment: fit (resuming from the cell's ``last.ckpt``),
    then return the fit's scalar metrics (:meth:`MetricsCallback.final_metrics`: the
    Trainer's ``callback_metrics``, completed from the config's ``MetricsCallback``, so that
    a fit resumed with nothing left to train still reports what it reached)."""
    from mushin_box._train.metrics import MetricsCallback  # torch: only where a cell runs

    trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    return MetricsCallback.final_metrics(trainer)


# ---------------------------------------------------------------------------- loading


def load_target(spec: str) -> tuple[Any, str | None]:
    """``(object, directory to put on the ranks' PYTHONPATH or None)`` for ``spec``.

    Raises
    ------
    LaunchError
        The file or module does not exist, importing it raised (a syntax error, an
        exception, a missing dependency: :func:`user_code_error` says where), or it defines
        none of the names looked for.
    """
    target, _, name = spec.partition(":")
    directory: str | None = None
    if target.endswith(".py") or os.sep in target:
        path = Path(target).resolve()
        if not path.is_file():
            raise LaunchError(f"experiment file {target!r} does not exist")
        if not path.stem.isidentifier():
            raise LaunchError(
                f"experiment file name {path.name!r} is not a Python module name: rename it "
                "(letters, digits, underscores) so the ranks can import it"
            )
        directory = str(path.parent)
        module_name = path.stem
        loaded = sys.modules.get(module_name)
        if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() != path:
            raise LaunchError(
                f"{path.name}: a different module named {module_name!r} is already imported "
                f"({loaded.__file__}); rename the experiment file"
            )
        if loaded is None:
            _check_not_shadowing(path)
        if directory not in sys.path:
            sys.path.insert(0, directory)
    else:
        module_name = target
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's code failed to import: where, and what to fix
        raise LaunchError(user_code_error(f"experiment {spec!r}", exc, module_name)) from exc
    names = (name,) if name else DEFAULT_NAMES
    for candidate in names:
        if hasattr(module, candidate):
            return getattr(module, candidate), directory
    raise LaunchError(
        f"{target} defines none of {', '.join(names)}: name a Workflow or a hydra-zen config "
        f"with trainer/module nodes, e.g. {target}:Config"
    )


def _check_not_shadowing(path: Path) -> None:
    """Refuse an experiment file named like an importable module (``yaml.py``): first on
    ``sys.path`` (and on the ranks' ``PYTHONPATH``) it would hide that module."""
    import importlib.util

    # look it up without the file's own directory (there already when it is the cwd of
    # `python -m`): what the name means to every other import
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != path.parent]
    try:
        spec = importlib.util.find_spec(path.stem)
    except (ImportError, ValueError):  # pragma: no cover - a broken finder: let import say
        return
    finally:
        sys.path[:] = saved
    if spec is None:
        return
    origin = spec.origin if spec.has_location else None
    if origin is not None and Path(origin).resolve() == path:
        return  # its directory is already on sys.path: the file itself
    where = origin or spec.origin or "a namespace package"
    raise LaunchError(
        f"experiment file {path.name!r} has the name of the module {path.stem!r} ({where}): "
        "imported first, it would hide that module from every rank. Rename the experiment "
        "file"
    )


def user_code_error(what: str, exc: BaseException, module: str | None = None) -> str:
    """One line for ``exc``, raised while importing the user's ``what`` (an experiment of
    ``launch``, a SPEC of ``build``): the error, where it was raised, and the fix.

    Both commands import user files and must say the same about the same mistake, so this
    is the one place that words it. A traceback would mostly show importlib's frames; the
    line that matters is the innermost one of the user's code, shown as ``file:line``.
    ``module`` is the module being imported by name: missing itself, it is a wrong name,
    not a missing dependency.
    """
    if isinstance(exc, SyntaxError):
        return (
            f"could not load {what}: {type(exc).__name__} at {exc.filename}:{exc.lineno}: "
            f"{exc.msg}; fix it there"
        )
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and module and (module == missing or module.startswith(missing + ".")):
        return (
            f"could not load {what}: there is no module {missing!r}; check the name, or add "
            "the directory that holds it to PYTHONPATH"
        )
    at = f" ({where})" if (where := _users_frame(exc)) else ""
    if missing:
        return (
            f"could not load {what}: it imports {missing!r}{at}, which is not installed in "
            f"this Python ({sys.executable}): install the package that provides it, or fix "
            "the import"
        )
    text = " ".join(str(exc).split())  # a multi-line message stays one line
    return f"could not load {what}: {type(exc).__name__}: {text}{at}; fix the code there"


def _users_frame(exc: BaseException) -> str | None:
    """``file:line`` of the innermost traceback frame in the user's code: not Python's
    (importlib, the standard library), not an installed package's, not mushin-box's."""
    import traceback

    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    theirs = [Path(p).resolve() for p in prefixes] + [Path(__file__).resolve().parents[1]]
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<")
        and not any(Path(frame.filename).resolve().is_relative_to(p) for p in theirs)
    ]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else None


# ---------------------------------------------------------------------------- the plan


@attrs.frozen
class LaunchPlan:
    """Everything :func:`run_launch` passes to ``Workflow.run`` (printable, no side effects)."""

    mode: str  # "slurm" or "local"
    nodes: int
    gpus: int
    launcher: str | None
    launcher_config: Mapping[str, Any] | None
    overrides: tuple[str, ...]
    working_dir: str | None
    pythonpath: str | None

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["overrides"] = list(self.overrides)
        return data


def check_working_dir(working_dir: str | None) -> None:
    """Refuse a sweep directory that cannot work, before anything is written to it.

    ``Workflow.run`` would fail later, with a traceback and after writing: on a file
    (``mkdir``), on a path holding ``${`` (Hydra resolves it as an interpolation in the
    cells' log paths, so the logs go elsewhere or nowhere; escaping it would only move the
    surprise), and on a directory another run holds the sweep lock of. The last is a
    probe: a run that starts after it is still stopped by ``Workflow.run``'s own lock.
    """
    if working_dir is None:  # Workflow.run's default lies under the current directory
        here = Path.cwd()
        if "${" in str(here):
            raise LaunchError(
                f"the default sweep directory (under {here}) contains '${{', which Hydra "
                "resolves as an interpolation in the sweep's log paths: run from another "
                "directory, or pass a --working-dir without '${'"
            )
        return
    root = Path(working_dir).resolve()
    if "${" in str(root):
        raise LaunchError(
            f"--working-dir {root} contains '${{', which Hydra resolves as an interpolation "
            "in the sweep's log paths: choose a directory without '${'"
        )
    existing = next(p for p in (root, *root.parents) if p.exists())  # "/" always exists
    if not existing.is_dir():
        raise LaunchError(
            f"--working-dir {root}: {existing} is a file, not a directory; choose another "
            "--working-dir"
        )
    if (root / LOCK_FILE).is_file():
        from mushin_box._sweep.manifest import SweepLock

        try:
            with SweepLock(root):
                pass
        except RuntimeError:
            raise LaunchError(
                f"another launch (or Workflow.run) is already using the sweep directory "
                f"{root}: wait for it to finish, or pass another --working-dir"
            ) from None


def _config_of(target: Any) -> Any:
    from mushin_box._sweep.workflow import Workflow

    return target.config if isinstance(target, Workflow) else target


def _select(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(OmegaConf.structured(config), key, default=None)
    except Exception:  # a config OmegaConf cannot read: no topology checks
        return None


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LaunchError(f"{name} must be a positive integer, got {value!r}")
    return value


def plan_launch(
    target: Any,
    *,
    nodes: int = 1,
    gpus: int = 1,
    overrides: Sequence[str] = (),
    local: bool | None = None,
    image: str | None = None,
    binds: Sequence[str] = (),
    image_python: str = "python",
    slurm: Mapping[str, Any] | None = None,
    working_dir: str | None = None,
    pythonpath: str | None = None,
    preflight: bool = True,
) -> LaunchPlan:
    """Decide how to run ``target`` on ``nodes`` x ``gpus`` ranks.

    Parameters
    ----------
    target : Workflow or hydra-zen config
        From :func:`load_target`.
    nodes, gpus : int
        Nodes, and GPUs = ranks per node.
    overrides : sequence of str
        Hydra overrides for the experiment (``key=value``, sweeps ``key=a,b``). Setting
        ``trainer.devices``/``trainer.num_nodes`` here is an error: ``--gpus``/``--nodes``
        say it.
    local : bool, optional
        Run here instead of on SLURM; default: only when ``sbatch`` is not on PATH.
    image, binds, image_python
        Run every SLURM rank in this Apptainer image (``submitit_slurm_config(image=...)``,
        checked before anything is submitted), with these binds and Python command.
    slurm : Mapping, optional
        More ``submitit_slurm_config`` arguments (partition, account, timeout_min, ...).
    working_dir : str, optional
        The sweep directory (default: ``Workflow.run``'s); refused when it cannot work
        (:func:`check_working_dir`).
    pythonpath : str, optional
        A directory the ranks must import the experiment from.
    preflight : bool
        Check the image before submitting (``False`` for a dry run without the image).

    Examples
    --------
    >>> from hydra_zen import make_config
    >>> trainer = {"strategy": {"_target_": "mushin_box.HydraDDP"}}
    >>> plan = plan_launch(make_config(trainer=trainer, module={}), gpus=2, local=True)
    >>> plan.mode, plan.launcher, list(plan.overrides)
    ('local', None, ['++trainer.devices=2', '++trainer.num_nodes=1', "++trainer.accelerator='cpu'"])
    """
    from mushin_box._core.overrides import format_override

    nodes, gpus = _positive("--nodes", nodes), _positive("--gpus", gpus)
    check_working_dir(working_dir)
    config = _config_of(target)
    has_trainer = _select(config, "trainer") is not None
    given = override_keys(overrides)
    for key in _TOPOLOGY_KEYS:
        if key in given:
            raise LaunchError(
                f"override {key} conflicts with --nodes/--gpus, which set it: drop the override"
            )
    if local is None:
        local = shutil.which("sbatch") is None
    out = list(overrides)
    if has_trainer:
        out += [
            format_override("trainer.devices", gpus, force_add=True),
            format_override("trainer.num_nodes", nodes, force_add=True),
        ]
    elif nodes * gpus > 1:
        raise LaunchError(
            f"{nodes * gpus} ranks requested, but the experiment's config has no `trainer` "
            "node whose devices/num_nodes mushin-box could set: add one, or use --gpus 1"
        )
    if local:
        if nodes > 1:
            raise LaunchError(
                f"--nodes {nodes} needs SLURM (no sbatch on PATH, or --local): run on a "
                "cluster's login node, or use --nodes 1"
            )
        if image is not None:
            raise LaunchError(
                "--image runs SLURM ranks in the image; here there is no SLURM. Use "
                "`mushin-box smoke EXP --image IMAGE` for a local run inside the image"
            )
        if "trainer.accelerator" not in given and has_trainer:
            out.append(format_override("trainer.accelerator", "cpu", force_add=True))
        if gpus > 1 and _select(config, "trainer.strategy._target_") not in _HYDRADDP_TARGETS:
            raise LaunchError(
                f"--gpus {gpus} here starts {gpus} CPU ranks with HydraDDP, but the trainer's "
                "strategy is not HydraDDP: set strategy=builds(mushin_box.HydraDDP), or "
                "use --gpus 1"
            )
        return LaunchPlan("local", nodes, gpus, None, None, tuple(out), working_dir, pythonpath)

    from mushin_box._slurm.config import submitit_slurm_config

    kwargs = dict(slurm or {})
    if image is not None:
        env = {"PYTHONPATH": pythonpath} if pythonpath else None
        kwargs.update(
            image=image, binds=list(binds), env=env, preflight=preflight, image_python=image_python
        )
        if working_dir is not None:
            kwargs["working_dir"] = working_dir
    elif binds or image_python != "python":
        raise LaunchError("--bind and --image-python configure the image: pass --image too")
    try:
        config_out = submitit_slurm_config(nodes=nodes, gpus_per_node=gpus, **kwargs)
    except (TypeError, ValueError) as exc:
        raise LaunchError(str(exc)) from None
    return LaunchPlan(
        "slurm", nodes, gpus, "mushin_slurm", config_out, tuple(out), working_dir, pythonpath
    )


def override_keys(overrides: Sequence[str]) -> set[str]:
    from hydra.errors import OverrideParseException

    from mushin_box._sweep.workflow import override_keys as keys

    try:
        return set(keys(overrides))
    except OverrideParseException as exc:
        raise LaunchError(f"bad override: {exc}") from None


def run_launch(
    target: Any,
    plan: LaunchPlan,
    *,
    resume: bool = False,
    on_error: str = "raise",
    progress: bool = True,
) -> Any:
    """Run the plan: ``Workflow.run`` with the plan's launcher and overrides.

    Raises
    ------
    LaunchError
        ``Workflow.run`` refused its arguments (TypeError/ValueError before the sweep
        started: nothing ran), or Hydra could not apply an override (an unknown key, a
        value of the wrong type). The same errors raised by a cell (``on_error='raise'``)
        propagate unchanged.
    """
    from hydra.errors import ConfigCompositionException

    from mushin_box._sweep.workflow import Workflow

    workflow = (
        target
        if isinstance(target, Workflow)
        else Workflow(fit_task, target, pre_call=seed_pre_call)
    )
    roots = {Path(d).resolve() for d in (plan.working_dir, workflow.working_dir) if d}
    before = {root: _manifest_run_id(root) for root in roots}
    created = _first_missing(Path(plan.working_dir).resolve()) if plan.working_dir else None
    saved = os.environ.get("PYTHONPATH")
    if plan.pythonpath:  # the ranks (sbatch exports this environment) import the experiment
        parts = [plan.pythonpath, *([saved] if saved else [])]
        os.environ["PYTHONPATH"] = os.pathsep.join(parts)
    try:
        return workflow.run(
            working_dir=plan.working_dir,
            launcher=plan.launcher,
            launcher_config=dict(plan.launcher_config) if plan.launcher_config else None,
            overrides=list(plan.overrides),
            resume=resume,
            on_error=on_error,  # type: ignore[arg-type]
            progress=progress,
        )
    except ConfigCompositionException as exc:  # an override Hydra cannot apply: no task ran
        raise LaunchError(str(exc)) from None
    except RuntimeError as exc:
        refusal = sbatch_refusal(exc)
        if refusal is None:
            raise
        if created is not None:  # no job exists: what this launch created is nobody's
            _remove_unless_cells(created)
        raise LaunchError(refusal) from None
    except (TypeError, ValueError) as exc:
        # raised before the sweep started (no new manifest: bad arguments, nothing ran) is a
        # usage error; after, it is a cell's own error (on_error='raise'): re-raised as is
        root = workflow.working_dir
        if root is not None:
            root = Path(root).resolve()
            run_id = _manifest_run_id(root)
            if run_id is not None and run_id != before.get(root):
                raise
        raise LaunchError(str(exc)) from None
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def sbatch_refusal(exc: BaseException) -> str | None:
    """One line for a job that sbatch refused to queue; None when ``exc`` is anything else.

    submitit raises ``FailedJobError(stderr)`` from the ``CalledProcessError`` of its
    ``sbatch`` call, and sbatch's stderr says why (``sbatch: error: invalid partition
    specified: nope``). That is input the user can fix, not a crash: sbatch's own words,
    without its prefix, on one line, and the options to check.
    """
    import re
    import subprocess

    cause = exc.__cause__
    if not isinstance(cause, subprocess.CalledProcessError):
        return None
    argv = cause.cmd if isinstance(cause.cmd, list | tuple) else str(cause.cmd).split()
    if not argv or Path(str(argv[0])).name != "sbatch":
        return None
    stderr = cause.stderr if isinstance(cause.stderr, str) else str(exc)
    lines = [re.sub(r"^sbatch:\s*(error:\s*)?", "", line.strip()) for line in stderr.splitlines()]
    said = "; ".join(line for line in lines if line) or f"exit status {cause.returncode}"
    return (
        f"sbatch refused the job: {said}; check --partition, --account and the other SLURM "
        "options (`sinfo` lists the partitions, `sacctmgr show associations user=$USER` "
        "your accounts)"
    )


def _first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist yet (what a
    ``mkdir(parents=True)`` of ``path`` creates), or None when ``path`` exists."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            return missing
        missing = p
    return missing


def _remove_unless_cells(created: Path) -> None:
    """Remove ``created``, made by this launch for a sweep whose job sbatch refused, unless
    a cell wrote its status there (an earlier batch of the same sweep ran: keep it)."""
    if created.is_dir() and next(created.rglob(STATUS_FILE), None) is None:
        shutil.rmtree(created, ignore_errors=True)


def _manifest_run_id(root: Path) -> str | None:
    """The ``run_id`` of the sweep manifest in ``root`` (``Workflow.run`` writes a new one
    once its arguments are checked, just before the cells start), or None."""
    from mushin_box._sweep.manifest import read_manifest

    manifest = read_manifest(root)
    run_id = manifest.get("run_id") if manifest is not None else None
    return str(run_id) if run_id is not None else None
