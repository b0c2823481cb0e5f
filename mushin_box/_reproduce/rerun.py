# SPDX-License-Identifier: MIT
"""``mushin-box reproduce CELL``: re-run a completed cell from its sidecars, then diff it.

The cell's files hold all the re-run needs (its combo is swept again). It runs as
``mushin-box launch`` into a new sweep, marked ``run.reproduction``; every check runs
before anything is written: a refusal leaves no directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import attrs

from mushin_box._core.envstate import environ_set
from mushin_box._core.layout import (
    PROVENANCE_FILE,
    SECRET_ENV_PREFIX,
    SECRET_NAMES_ENV,
    STATUS_FILE,
    WORKTREE_DIR,
    default_sweep_dir,
)
from mushin_box._core.overrides import format_override
from mushin_box._core.sidecars import read_json
from mushin_box._core.targets import public
from mushin_box._launch.loading import user_code_error
from mushin_box._launch.plan import LaunchError, plan_launch
from mushin_box._launch.review import env_file
from mushin_box._launch.run import run_launch
from mushin_box._provenance.env import NO_IMAGE
from mushin_box._provenance.files import write_provenance
from mushin_box._provenance.task import in_image, load_callable
from mushin_box._reproduce.checks import (
    CodeCheck,
    ImageCheck,
    Original,
    ReproduceError,
    check_code,
    check_image,
    check_secrets,
    part,
    rank_argv,
    read_original,
)
from mushin_box._reproduce.rebuild import image_recipe, rebuild_image
from mushin_box._reproduce.trust import check_sources, checkout, discard
from mushin_box._results.diff import DiffInputError, check_tolerances, diff_provenance
from mushin_box._sweepdir.manifest import cell_records, combo_id

#: recorded hydra.launcher keys that ``submitit_slurm_config`` takes again
_SLURM_KEYS = ("partition", "account", "timeout_min", "mem_gb", "cpus_per_task", "qos")


@attrs.frozen
class ReproducePlan:
    """What :func:`reproduce` will run (``--dry-run`` prints it); no side effects."""

    cell: str
    provenance_sha256: str  # of the original's record file
    into: str
    task: str
    pre_call: str | None
    combo: Mapping[str, Any]
    seed_base: Any
    config: Mapping[str, Any]  # the saved config, secrets as references
    secrets: tuple[str, ...]  # the environment variables it reads (names only)
    recorded_topology: tuple[int, int]  # (nodes, ranks per node)
    nodes: int
    gpus: int
    recorded_launcher: str | None
    launch: Mapping[str, Any]  # the LaunchPlan: mode, launcher, config, overrides, ...
    code: CodeCheck
    image: ImageCheck
    #: the ranks' env file (``path``, redacted ``text``), as the launch will write it
    env_file: Mapping[str, str] | None = None
    #: where the re-run's code is checked out (``worktree``), or None: the tree here
    worktree: str | None = None

    def to_dict(self) -> dict[str, Any]:
        moved = ("recorded_topology", "nodes", "gpus", "recorded_launcher", "launch")
        (nodes, gpus) = self.recorded_topology
        return {
            **attrs.asdict(self, filter=lambda a, _: a.name not in moved),
            "topology": {
                "recorded": {"nodes": nodes, "gpus": gpus},
                "nodes": self.nodes,
                "gpus": self.gpus,
            },
            "launcher": {"recorded": self.recorded_launcher, **dict(self.launch)},
            "code": self.code.to_dict(),
        }


@public
@attrs.frozen
class ReproduceResult:
    """What :func:`mushin_box.reproduce` did.

    Attributes
    ----------
    plan : ReproducePlan
        What was (or, for a dry run, would be) run.
    cell_dir : Path or None
        The re-run's cell (None for a dry run, or when the re-run left none).
    diff : Diff or None
        The original compared with the re-run (:func:`mushin_box._results.diff.diff_provenance`).
    error : str or None
        Why the re-run did not complete (its task raised, its job failed).
    rebuilt_image : Path or None
        Where ``rebuild_image`` put the image it rebuilt (its sha256 is the recorded one).
    """

    plan: ReproducePlan
    cell_dir: Path | None = None
    diff: Any = None
    error: str | None = None
    rebuilt_image: Path | None = None

    @property
    def ok(self) -> bool:
        """The re-run completed, with the same reproducibility part and metrics."""
        return self.error is None and self.diff is not None and bool(self.diff.same())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "cell_dir": str(self.cell_dir) if self.cell_dir else None,
            "error": self.error,
            "rebuilt_image": str(self.rebuilt_image) if self.rebuilt_image else None,
            "plan": self.plan.to_dict(),
            "diff": self.diff.to_dict() if self.diff is not None else None,
        }


def _name(entry: Mapping[str, Any] | None) -> str | None:
    return f"{entry['module']}:{entry['qualname']}" if entry else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def recorded_topology(run: Mapping[str, Any]) -> tuple[int, int]:
    """``(nodes, ranks per node)`` the cell ran on, from ``run.topology`` (1, 1 if unknown).

    >>> recorded_topology({"topology": {"num_nodes": 2, "world_size": 8,
    ...                                 "tasks_per_node": [4, 4]}})
    (2, 4)
    >>> recorded_topology({})
    (1, 1)
    """
    topo = part(run, "topology")
    nodes = _int(topo.get("num_nodes")) or 1
    per_node = topo.get("tasks_per_node")
    if isinstance(per_node, list) and per_node and _int(per_node[0]):
        return nodes, int(per_node[0])
    world = _int(topo.get("world_size")) or nodes
    return nodes, max(1, world // nodes)


def _into(into: str | os.PathLike[str] | None, original: Original) -> Path:
    if into is None:
        into = default_sweep_dir("-reproduce")
    root = Path(into).resolve()
    if root == original.cell_dir.parent or root == original.cell_dir:
        raise ReproduceError(
            "{into} is the original's own sweep: the re-run would replace the "
            "cell it is compared with; choose a new directory",
            arguments={"into": into},
        )
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ReproduceError(
            "{into} already exists and is not empty; choose a new directory",
            arguments={"into": into},
        )
    return root


def _rerun_workflow(original: Original, task: Any, config: Any, pre_call: Any) -> Any:
    """The re-run's ``Workflow``: the cell's combo swept again (one value each), with the
    secret names the original launch declared."""
    from hydra_zen import multirun

    # lazy: imports hydra, hydra_zen, omegaconf (a reader must not load them)
    from mushin_box._sweep.workflow import Workflow

    swept = {key: multirun([value]) for key, value in original.combo.items()}
    file = part(original.run, "experiment").get("file")
    source = file if isinstance(file, str) and Path(file).is_file() else None

    class ReproduceWorkflow(Workflow):
        def run(self, **kwargs: Any) -> Any:
            return super().run(**kwargs, **swept)  # pyright: ignore[reportArgumentType, reportCallIssue]

    try:  # the secret names the original launch declared (carried in its environment)
        names = json.loads(str(part(original.run, "env").get(SECRET_NAMES_ENV) or "[]"))
    except ValueError:
        names = []
    secrets = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    return ReproduceWorkflow(task, config, pre_call=pre_call, secrets=secrets, source=source)


def _load(original: Original) -> tuple[Any, Any, str | None]:
    """``(task, pre_call, the directory the ranks import them from)``: none for one from
    the image (the host's would hide it)."""
    located = original.run["task"]
    in_an_image = isinstance(original.repro.get("image"), Mapping)
    argv = (rank_argv(original.run) or []) if in_an_image else None
    out: list[Any] = []
    directory: str | None = None
    for what in ("task", "pre_call"):
        entry = located.get(what)
        if entry is None:
            out.append(None)
            continue
        try:
            fn, where = load_callable(entry)
        except Exception as exc:  # the user's code failed to import: where, and what to fix
            raise ReproduceError(user_code_error(f"the {what} {_name(entry)}", exc)) from None
        if argv is not None and in_image(entry.get("file"), argv, os.environ.get("HOME")):
            where = None
        directory = directory or where
        out.append(fn)
    return out[0], out[1], directory


def _secrets_refused(secrets: Sequence[str]) -> NoReturn:
    raise ReproduceError(
        "the code fingerprint differs from the cell's (allow_dirty), and the cell takes "
        f"secrets ({', '.join(secrets)}): they are handed only to the code that ran; "
        "check out the cell's code, or run it without them"
    )


def plan_reproduce(
    cell: str | os.PathLike[str],
    *,
    into: str | os.PathLike[str] | None = None,
    nodes: int | None = None,
    gpus: int | None = None,
    image: str | os.PathLike[str] | None = None,
    local: bool = False,
    allow_dirty: bool = False,
    rebuild: bool = False,
    worktree: bool = False,
    dry_run: bool = False,
) -> tuple[ReproducePlan, Any, Any]:
    """``(plan, workflow, launch plan)``; writes only the rebuilt image and the worktree."""
    from omegaconf import OmegaConf

    original = read_original(cell)
    secrets = check_secrets(original.config, os.environ)
    launcher = part(original.run, "launcher")
    ran = part(launcher, "config")
    settings = {k: ran[k] for k in _SLURM_KEYS if ran.get(k) not in (None, "<redacted>")}
    slurm = launcher.get("name") in ("mushin_slurm", "submitit_slurm") and not local
    if original.repro.get("image", NO_IMAGE) not in (None, NO_IMAGE) and not slurm:
        raise ReproduceError(
            "the cell ran in an image, and only a SLURM launch runs ranks in one: drop "
            "{local}, and run on the cluster (`mushin-box smoke --image` runs an image "
            "here)",
            arguments={"local": True},
        )
    if slurm and shutil.which("sbatch") is None:
        raise ReproduceError(
            f"the cell ran on SLURM ({launcher.get('name')}), but there is no sbatch on PATH: "
            "run this on the cluster's login node, or pass {local} to run it here",
            arguments={"local": True},
        )
    root = _into(into, original)
    where, fresh = root / WORKTREE_DIR if worktree else None, not root.exists()
    if where is not None:
        original = checkout(original, where)
    try:
        config = OmegaConf.create(original.config)
        same, moved = check_sources(original, config, allow_dirty=allow_dirty)  # before any import
        if rebuild:
            image = rebuild_image(image_recipe(original))
        img = check_image(original, None if image is None else str(image))
        if secrets and not same:
            _secrets_refused(secrets)
        task, pre_call, directory = _load(original)
        code = check_code(original, task, pre_call, config, allow_dirty=allow_dirty, moved=moved)
        if secrets and code.recorded.get("task_sha256") != code.current.get("task_sha256"):
            _secrets_refused(secrets)  # the import changed what its files said
        rec_nodes, rec_gpus = recorded_topology(original.run)
        workflow = _rerun_workflow(original, task, config, pre_call)
        # a local launch keeps the config's accelerator (plan_launch would set cpu)
        accelerator = part(original.config, "trainer").get("accelerator")
        keep = not slurm and accelerator is not None
        try:
            launch = plan_launch(
                workflow,
                nodes=rec_nodes if nodes is None else nodes,
                gpus=rec_gpus if gpus is None else gpus,
                overrides=[format_override("trainer.accelerator", accelerator)] if keep else [],
                local=not slurm,
                image=img.path,
                binds=img.binds,
                image_python=img.python,
                slurm=settings if slurm else None,
                working_dir=str(root),
                pythonpath=directory,
                preflight=True,  # a dry run shows the env file and its name that will run
            )
        except LaunchError as exc:
            raise ReproduceError(str(exc)) from None
        located = original.run["task"]
        plan = ReproducePlan(
            cell=str(original.cell_dir),
            provenance_sha256=original.provenance_sha256,
            into=str(root),
            task=_name(located.get("task")) or "?",
            pre_call=_name(located.get("pre_call")),
            combo=original.combo,
            seed_base=(original.repro.get("seed") or {}).get("base")
            if isinstance(original.repro.get("seed"), Mapping)
            else original.repro.get("seed_base"),
            config=original.config,
            secrets=tuple(secrets),
            recorded_topology=(rec_nodes, rec_gpus),
            nodes=launch.nodes,
            gpus=launch.gpus,
            recorded_launcher=launcher.get("name"),
            launch=launch.to_dict(),
            code=code,
            image=img,
            env_file=env_file(launch.launcher_config),
            worktree=None if where is None else str(where),
        )
    except BaseException:
        if where is not None:
            _remove_worktree(root, where, fresh)
        raise
    if dry_run and where is not None:
        _remove_worktree(root, where, fresh)
    return plan, workflow, launch


def _remove_worktree(root: Path, where: Path, fresh: bool) -> None:
    """Undo :func:`~.trust.checkout`, and the directories made for it."""
    discard(where)
    for made in (where.parent, *((root,) if fresh else ())):
        with contextlib.suppress(OSError):
            made.rmdir()


def _mark(cell_dir: Path, plan: ReproducePlan) -> None:
    """Record in the re-run's ``run`` part that it reproduces the original."""
    record = read_json(cell_dir / PROVENANCE_FILE)
    if not isinstance(record, dict):
        return
    run = dict(record.get("run") or {})
    run["reproduction"] = {
        "of": plan.cell,
        "provenance_sha256": plan.provenance_sha256,
        "allow_dirty": plan.code.allow_dirty,
        "code_differences": list(plan.code.problems),
        **({"checkout_differences": list(plan.code.moved)} if plan.code.moved else {}),
        **({"worktree": plan.worktree} if plan.worktree else {}),
        "topology": {"nodes": plan.nodes, "gpus": plan.gpus},
        "recorded_topology": dict(zip(("nodes", "gpus"), plan.recorded_topology, strict=True)),
    }
    write_provenance(cell_dir, {**record, "run": run})


@public
def reproduce(
    cell_dir: str | os.PathLike[str],
    *,
    into: str | os.PathLike[str] | None = None,
    nodes: int | None = None,
    gpus: int | None = None,
    image: str | os.PathLike[str] | None = None,
    local: bool = False,
    atol: float = 0.0,
    rtol: float = 0.0,
    allow_dirty: bool = False,
    dry_run: bool = False,
    progress: bool = False,
    rebuild_image: bool = False,
    worktree: bool = False,
) -> ReproduceResult:
    """Re-run a completed cell from its sidecars alone, and diff the re-run against it.

    Parameters
    ----------
    cell_dir : path
        A completed cell of a sweep (``mushin_status.json``, ``mushin_provenance.json``,
        ``.hydra/config.yaml``).
    into : path, optional
        The new sweep directory of the re-run (default ``multirun/<time>-reproduce``);
        must not exist yet, or be empty.
    nodes, gpus : int, optional
        The topology (default: the recorded one). The reproducibility part does not
        depend on it; metrics may (see docs/reproduce.md).
    image : path, optional
        The SIF to run in; its sha256 must be the recorded one (default: the recorded path).
    local : bool
        Run here, not on SLURM, whatever the cell's launcher was.
    atol, rtol : float
        Absolute and relative tolerance of the metrics (default 0: exactly equal), as for
        ``diff``: ``|new - recorded| <= atol + rtol * |recorded|``.
    allow_dirty : bool
        Run although the code differs (another commit, uncommitted changes, another code
        fingerprint); recorded in the re-run's ``run.reproduction``.
    dry_run : bool
        Check and plan only: nothing runs, nothing is written.
    progress : bool
        Show the progress bar of the re-run.
    rebuild_image : bool
        Rebuild the cell's image from the recipe its record holds (a native build, at the
        recorded commit of the repository here) and run in it when its sha256 is the
        recorded one (:mod:`mushin_box._reproduce.rebuild`).
    worktree : bool
        Run the cell's own code, whatever is checked out here: its commit, checked out in a
        git worktree of the repository in the re-run's sweep (``.mushin/worktree``), with
        the uncommitted code it ran applied from its sweep's copy
        (:func:`mushin_box._reproduce.trust.checkout`). The tree here is left as it is.

    Returns
    -------
    ReproduceResult
        ``.ok``: reproduced; ``.diff``: the comparison; ``.cell_dir``: the re-run's cell.

    Raises
    ------
    ReproduceError
        Nothing was written: not a completed cell, a secret not set, other code (unless
        ``allow_dirty``), another image sha256, an impossible topology or launcher, an
        ``into`` that is not new, no recipe or commit to rebuild from, a rebuilt image of
        another sha256, no commit or kept code to check out (``worktree``).
    NativeBuildRefused, BuildError
        With ``rebuild_image``: this machine cannot build the image, or the build failed.
    """
    try:
        check_tolerances(atol, rtol)
    except DiffInputError as exc:
        raise ReproduceError(str(exc)) from None
    if rebuild_image and (image is not None or dry_run):
        raise ReproduceError(
            "{rebuild_image} builds the image the re-run runs in: drop "
            + ("{image}" if image is not None else "{dry_run} (a dry run builds nothing)"),
            arguments={"rebuild_image": True, "image": image, "dry_run": True},
        )
    plan, workflow, launch = plan_reproduce(
        cell_dir,
        into=into,
        nodes=nodes,
        gpus=gpus,
        image=image,
        local=local,
        allow_dirty=allow_dirty,
        rebuild=rebuild_image,
        worktree=worktree,
        dry_run=dry_run,
    )
    if dry_run:
        return ReproduceResult(plan)
    error: str | None = None
    forwarded = {  # the config's secrets, to ranks in an image (``--cleanenv``)
        "APPTAINERENV_" + name: os.environ[name]
        for name in plan.secrets
        if name.startswith(SECRET_ENV_PREFIX) and name in os.environ
    }
    try:
        with environ_set(forwarded):
            run_launch(workflow, launch, progress=progress)
    except LaunchError as exc:
        raise ReproduceError(str(exc)) from None
    except Exception as exc:  # the re-run's task or job failed: recorded by its cell
        error = f"the re-run failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    root = Path(plan.into)
    want = combo_id(plan.combo)
    new = next((c for c, status in cell_records(root) if combo_id(status["combo"]) == want), None)
    if new is None:
        return ReproduceResult(plan, None, None, error or f"the re-run left no cell in {root}")
    _mark(new, plan)
    diff = diff_provenance(plan.cell, new, atol=float(atol), rtol=float(rtol))
    status = read_json(new / STATUS_FILE)
    state = status.get("status") if isinstance(status, dict) else None
    if error is None and state != "completed":
        error = f"the re-run's cell is {state}"
    rebuilt = Path(str(plan.image.path)) if rebuild_image else None
    return ReproduceResult(plan, new, diff, error, rebuilt)
