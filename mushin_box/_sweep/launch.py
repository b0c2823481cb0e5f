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

from mushin_box._train.resume import ResumeContext

__all__ = ["LaunchError", "LaunchPlan", "fit_task", "load_target", "plan_launch", "seed_pre_call"]

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
    then return the Trainer's scalar ``callback_metrics``."""
    trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    out: dict[str, float] = {}
    for name, value in trainer.callback_metrics.items():
        try:
            out[str(name)] = float(value)
        except (TypeError, ValueError):  # non-scalar tensors are not cell metrics
            continue
    return out


# ---------------------------------------------------------------------------- loading


def load_target(spec: str) -> tuple[Any, str | None]:
    """``(object, directory to put on the ranks' PYTHONPATH or None)`` for ``spec``.

    Raises
    ------
    LaunchError
        The file or module does not exist, or defines none of the names looked for.
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
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing != module_name and not module_name.startswith(missing + "."):
            raise  # the experiment module itself imports something that is missing
        raise LaunchError(f"cannot import experiment module {module_name!r}") from None
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
        The sweep directory (default: ``Workflow.run``'s).
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


def _manifest_run_id(root: Path) -> str | None:
    """The ``run_id`` of the sweep manifest in ``root`` (``Workflow.run`` writes a new one
    once its arguments are checked, just before the cells start), or None."""
    from mushin_box._sweep.manifest import read_manifest

    manifest = read_manifest(root)
    run_id = manifest.get("run_id") if manifest is not None else None
    return str(run_id) if run_id is not None else None
