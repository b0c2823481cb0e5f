# SPDX-License-Identifier: MIT
"""``mushin-box smoke``: a tiny 2-rank CPU fit inside the image, through the same rank
wrapper code as SLURM ranks (env file, ``apptainer exec --cleanenv --env-file``).

The two ranks are started here, on this machine, with the variables ``srun`` would give
two tasks of one node (``SLURM_PROCID``, ``SLURM_NTASKS``, ...), so Lightning's
``SLURMEnvironment`` and HydraDDP's world-size check run exactly as on the cluster.
"""

from __future__ import annotations

import importlib
import os
import runpy
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from mushin_box._container.launchspec import ContainerLaunch, MasterPort
from mushin_box._container.preflight import preflight
from mushin_box._container.rankwrap import plan_env_file, rank_argv
from mushin_box._core.layout import SMOKE_JOB_NAME
from mushin_box._core.sidecars import write_text_atomic
from mushin_box._image.build import ApptainerNotFound
from mushin_box._upstream.lightning import namespace_of

WORLD = 2


@attrs.frozen
class SmokeResult:
    ok: bool
    out_dir: Path
    exit_codes: tuple[int | None, ...]
    seconds: float
    fit_metrics: tuple[Path, ...]
    message: str


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smoke_rank_env(rank: int, job_id: str) -> dict[str, str]:
    """The environment ``srun`` would give task ``rank`` of a 1-node, 2-task job."""
    return dict(
        os.environ,
        SLURM_JOB_ID=job_id,
        SLURM_JOB_NAME=SMOKE_JOB_NAME,
        SLURM_NNODES="1",
        SLURM_JOB_NUM_NODES="1",
        SLURM_NODELIST="localhost",
        SLURM_JOB_NODELIST="localhost",
        SLURM_NTASKS=str(WORLD),
        SLURM_NTASKS_PER_NODE=str(WORLD),
        SLURM_NODEID="0",
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank),
        SLURM_CPUS_PER_TASK="1",
        SLURM_TASKS_PER_NODE=str(WORLD),
        CUDA_VISIBLE_DEVICES="",
    )


def _absolute_experiment(experiment: str | None) -> str | None:
    """``exp.py[:NAME]`` with the file's path made absolute (``module:attr`` as it is).

    >>> _absolute_experiment("pkg.mod:Config"), _absolute_experiment(None)
    ('pkg.mod:Config', None)
    >>> _absolute_experiment("exp.py:Config") == f"{Path.cwd() / 'exp.py'}:Config"
    True
    """
    if experiment is None:
        return None
    target, sep, name = experiment.partition(":")
    if target.endswith(".py") or os.sep in target:
        target = str(Path(target).absolute())
    return f"{target}{sep}{name}"


def run_smoke(
    image: str | os.PathLike[str],
    *,
    experiment: str | None = None,
    out_dir: str | os.PathLike[str] | None,
    python: str = "python",
    timeout_s: float = 600.0,
    check_image: bool = True,
) -> SmokeResult:
    """Run the smoke fit (1 epoch on 2 CPU ranks) and report, within ``timeout_s``.

    ``experiment``: ``path/to/exp.py`` or ``module:attr`` naming a hydra-zen config with
    ``trainer``, ``module`` and optional ``datamodule`` nodes (default: the kit's tiny
    model). ``out_dir`` None: a new temporary directory. Raises ``ApptainerNotFound`` or
    ``PreflightError`` before anything is written.
    """
    if shutil.which("apptainer") is None:  # the ranks are `apptainer exec ...`
        raise ApptainerNotFound("run the smoke fit's ranks (`apptainer exec`)", hint=None)
    # the ranks start in --pwd OUT, not here: every path they are given is made absolute
    image = Path(image).absolute()
    experiment = _absolute_experiment(experiment)
    identity = preflight(image).identity if check_image else None
    if out_dir is None:
        out = Path(tempfile.mkdtemp(prefix=f"{SMOKE_JOB_NAME}-")).resolve()
    else:
        out = Path(out_dir).resolve()
        out.mkdir(parents=True, exist_ok=True)
    spec = ContainerLaunch(
        image=os.fspath(image),
        nv=False,
        nccl=None,
        python=python,
        master_port=MasterPort(fixed=_free_port()),
        project_dir=os.getcwd(),
    )
    # the same env file as a SLURM rank's: content-addressed under OUT/.mushin-box/, with
    # the image identity, the rank command and its own path
    env = plan_env_file(spec, working_dir=out, run_id="smoke", identity=identity)
    write_text_atomic(env.path, env.text)
    args = ["-u", "-m", "mushin_box._container.smoke", str(out)]
    if experiment:
        args.append(experiment)
    argv = rank_argv(spec, env.path, args, working_dir=out)
    job_id = str(10_000 + os.getpid() % 50_000)
    start = time.monotonic()
    procs = [
        subprocess.Popen(argv, env=smoke_rank_env(rank, job_id), start_new_session=True)
        for rank in range(WORLD)
    ]
    codes: list[int | None] = []
    for proc in procs:
        remaining = max(0.0, timeout_s - (time.monotonic() - start))
        try:
            codes.append(proc.wait(timeout=remaining))
        except subprocess.TimeoutExpired:
            codes.append(None)
    for proc in procs:  # bounded: whatever is left is killed with its children
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    seconds = time.monotonic() - start
    metrics = tuple(sorted(out.rglob("fit_metrics.pt")))
    ok = codes == [0] * WORLD and len(metrics) == 1
    if ok:
        message = f"2 ranks fit in {seconds:.1f}s; fit_metrics.pt written once: {metrics[0]}"
    elif None in codes:
        message = f"timed out after {timeout_s:.0f}s (exit codes {codes})"
    else:
        message = f"rank exit codes {codes}, {len(metrics)} fit_metrics.pt file(s)"
    return SmokeResult(ok, out, tuple(codes), seconds, metrics, message)


def _load_experiment_config(spec: str) -> Any:
    """A hydra-zen config from ``file.py[:attr]`` or ``module:attr`` (default attr Config)."""
    target, _, attr = spec.partition(":")
    attr = attr or "Config"
    if target.endswith(".py"):
        namespace = runpy.run_path(target, run_name="__mushin_smoke__")
        if attr not in namespace:
            raise SystemExit(f"{target} defines no {attr!r} (a hydra-zen config)")
        return namespace[attr]
    return getattr(importlib.import_module(target), attr)


def main_rank(out_dir: str, experiment: str | None) -> None:
    """One smoke rank (runs inside the image): build the experiment, fit one epoch, with the
    kit's classes of the Lightning namespace the experiment's module is of."""
    from hydra_zen import builds, get_target, instantiate, make_config

    base = _load_experiment_config(experiment) if experiment else None
    try:
        module_target = get_target(base.module)  # pyright: ignore[reportOptionalMemberAccess]
    except (AttributeError, TypeError):  # no experiment, or a module node without a target
        module_target = None
    namespace = namespace_of(module_target) if isinstance(module_target, type) else None
    kit = importlib.import_module(
        "mushin_box._train.lp" if namespace == "lightning.pytorch" else "mushin_box._train.pl"
    )
    trainer = builds(
        importlib.import_module(namespace or "pytorch_lightning").Trainer,
        accelerator="cpu",
        devices=WORLD,
        num_nodes=1,
        max_epochs=1,
        strategy=builds(kit.HydraDDP),
        callbacks=[builds(kit.MetricsCallback, save_dir=out_dir)],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=out_dir,
    )
    if base is not None:
        cfg = make_config(trainer=trainer, bases=(base,))
    else:
        cfg = make_config(
            trainer=trainer, module=builds(kit.TinyModule), datamodule=builds(kit.TinyDataModule)
        )
    built = instantiate(cfg)
    datamodule = built.get("datamodule") if hasattr(built, "get") else None
    built.trainer.fit(built.module, datamodule=datamodule)
    print(f"[mushin-box smoke] rank {built.trainer.global_rank} of {built.trainer.world_size} done")
    sys.stdout.flush()
    # a rank exiting while gloo holds its peers' sockets can abort in C++ (exit -6): leave
    # the group together, and close it before the interpreter tears the threads down
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":  # a smoke rank: python -m mushin_box._container.smoke OUT [EXPERIMENT]
    main_rank(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
