# SPDX-License-Identifier: MIT
"""mushin-box's Hydra launchers ``mushin_slurm`` and ``mushin_local`` on submitit (the
plugin in ``hydra_plugins/mushin_box_launcher`` forwards to :class:`SubmititCellLauncher`).

One submitit job per sweep cell, in job arrays (:mod:`mushin_box._slurm.arrays`), each
recorded at once (:mod:`mushin_box._slurm.submitted`). Every srun task runs the whole Hydra
job (:class:`CellJob`), as the stock launcher does; rank 0's ``JobReturn`` is the cell's,
final once rank 0 returned success or SLURM reports the job inactive. ``python`` (e.g.
``apptainer exec --nv image.sif python``) runs the ranks in the image while the batch
script, which requeues (:mod:`mushin_box._slurm.requeue`), stays on the host. Ctrl-C leaves
SLURM jobs running unless ``cancel_on_interrupt``; local jobs, children of this process,
are cancelled.

Quoting: every value reaching the sbatch script is quoted and control characters are
refused; ``setup`` lines are the one escape hatch: shell code, copied verbatim.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mushin_box._slurm import arrays
from mushin_box._slurm.config import SETTING_FIELDS, refuse_control_characters
from mushin_box._slurm.jobs import is_live, sweep_mark
from mushin_box._slurm.requeue import REQUEUE_SIGNAL, RequeueReason, requeue_setup_lines
from mushin_box._slurm.submitted import record_submission
from mushin_box._slurm.torchrun import JOB_NODES_SETUP, check_torchrun_settings, task_python
from mushin_box._upstream.hydra import job_return_value
from mushin_box._upstream.submitit import sbatch_mem, sbatch_script, submit_command

log = logging.getLogger(__name__)

PLUGIN_MODULE = "hydra_plugins.mushin_box_launcher.mushin_box_launcher"


@dataclass
class _QueueConf:
    """The fields of hydra-submitit-launcher 1.2.0's ``BaseQueueConf``, same names and
    defaults: besides the folder, the parameters of submitit's local executor."""

    submitit_folder: str = "${hydra.sweep.dir}/.submitit/%j"
    timeout_min: int = 60
    cpus_per_task: int | None = None
    gpus_per_node: int | None = None
    tasks_per_node: int = 1
    mem_gb: int | None = None
    nodes: int = 1
    name: str = "${hydra.job.name}"
    stderr_to_stdout: bool = False


@dataclass
class _BaseLauncherConf(_QueueConf):
    python: str | None = None  # submitit's python command (split into words, each quoted)
    poll_interval_s: float = 5.0  # how often the launcher checks on its jobs
    max_wait_s: float | None = None  # cancel the jobs still running after this long
    detach: bool = False  # submit, record the jobs, return without waiting
    cancel_on_interrupt: bool = False  # Ctrl-C cancels the jobs (default: they keep running)


@dataclass
class LocalLauncherConf(_BaseLauncherConf):
    """``hydra/launcher=mushin_local``: each cell as local processes (submitit's local executor).

    >>> LocalLauncherConf(timeout_min=5).tasks_per_node
    1
    """

    _target_: str = f"{PLUGIN_MODULE}.MushinLocalLauncher"
    # torchrun=True: the cell is one `torchrun --standalone` agent (tasks_per_node stays 1)
    # with nproc_per_node workers, restarted up to max_restarts times (_slurm/torchrun.py)
    torchrun: bool = False
    nproc_per_node: int = 1
    max_restarts: int = 0


@dataclass
class SlurmLauncherConf(_BaseLauncherConf):
    """``hydra/launcher=mushin_slurm``: every field of hydra-submitit-launcher 1.2.0's
    ``SlurmQueueConf``, plus ``python``, ``srun_args`` and the host-side requeue policy.

    >>> conf = SlurmLauncherConf(nodes=2, tasks_per_node=4, gpus_per_node=4,
    ...                          python="apptainer exec --nv image.sif python")
    >>> [r.value for r in conf.requeue_on], conf.max_requeues, conf.rank_signal
    (['preemption'], 3, 'USR1')
    """

    _target_: str = f"{PLUGIN_MODULE}.MushinSlurmLauncher"
    partition: str | None = None
    qos: str | None = None
    comment: str | None = None
    constraint: str | None = None
    exclude: str | None = None
    gres: str | None = None
    cpus_per_gpu: int | None = None
    gpus_per_task: int | None = None
    mem_per_gpu: str | None = None
    mem_per_cpu: str | None = None
    account: str | None = None
    signal_delay_s: int = 120  # SLURM signals the batch shell this long before the limit
    max_num_timeout: int = 0  # submitit's in-process requeue: must stay 0 (see requeue_on)
    additional_parameters: dict[str, Any] = field(default_factory=dict)
    array_parallelism: int = arrays.DEFAULT_ARRAY_PARALLELISM  # the sweep's cells at once
    max_array_tasks: int | None = None  # cells per array (None: the cluster's MaxArraySize)
    setup: list[str] | None = None  # shell lines, verbatim, before srun
    # mushin-box
    srun_args: list[str] | None = None
    requeue_on: list[RequeueReason] = field(default_factory=lambda: [RequeueReason.preemption])
    max_requeues: int = 3  # compared with SLURM_RESTART_COUNT
    rank_signal: str | None = "USR1"  # sent to every rank on preemption/timeout; None: none
    # torchrun=True: one task per node, a torchrun agent (c10d rendezvous on the job's first
    # node) of nproc_per_node workers; min_nodes: elastic membership min_nodes..nodes
    torchrun: bool = False
    nproc_per_node: int = 1
    max_restarts: int = 0
    min_nodes: int | None = None


def _signal_name(key: str, value: object) -> str:
    name = str(value).upper().removeprefix("SIG")
    if not hasattr(signal, f"SIG{name}") or name in ("KILL", "STOP"):
        raise ValueError(f"{key}={value!r} is not a signal name a process can handle (e.g. USR1)")
    if name == REQUEUE_SIGNAL:
        raise ValueError(
            f"{key}={value!r}: SIG{REQUEUE_SIGNAL} is submitit's in-process requeue signal, which "
            "the ranks ignore under mushin_slurm; use another signal, e.g. USR1 or TERM"
        )
    return name


def _python_command(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        words = shlex.split(value)
    except ValueError as error:
        raise ValueError(f"python={value!r} is not a valid command line: {error}") from None
    if not words:
        raise ValueError(
            "python must be a command, e.g. 'python3' or 'apptainer exec x.sif python'"
        )
    return shlex.join(words)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


def _settings(cluster: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Every launcher field (defaults filled in), checked, as plain python values."""
    conf = SlurmLauncherConf() if cluster == "slurm" else LocalLauncherConf()
    settings = dataclasses.asdict(conf)
    unknown = sorted(set(params) - set(settings))
    if unknown:
        raise ValueError(f"unknown mushin_{cluster} launcher field(s) {unknown}")
    settings.update({k: _plain(v) for k, v in params.items()})
    del settings["_target_"]
    for key, value in settings.items():
        if key != "setup":  # shell code by design; everything else is a value
            for item in value if isinstance(value, list) else [value]:  # pyright: ignore[reportUnknownVariableType]
                refuse_control_characters(key, item)
    settings["python"] = _python_command(settings["python"])
    if not settings["poll_interval_s"] > 0:
        raise ValueError(f"poll_interval_s must be > 0, got {settings['poll_interval_s']}")
    if cluster == "slurm":
        settings["additional_parameters"] = settings["additional_parameters"] or {}
    for f in SETTING_FIELDS:  # a SlurmSettings field's check (sbatch options: the one check)
        if settings.get(f.name) is not None and f.metadata["check"] is not None:
            settings[f.name] = f.metadata["check"](f.name, settings[f.name])
    if cluster != "slurm":
        return check_torchrun_settings(settings)
    if settings["max_num_timeout"]:
        raise ValueError(
            "max_num_timeout drives submitit's in-process requeue, which mushin_slurm replaces "
            "with a host-side one: set requeue_on=[timeout] (or [preemption,timeout]) and "
            "max_requeues=N instead, and leave max_num_timeout at 0"
        )
    settings["requeue_on"] = [RequeueReason(r).value for r in settings["requeue_on"] or []]
    if settings["rank_signal"] is not None:
        settings["rank_signal"] = _signal_name("rank_signal", settings["rank_signal"])
    return check_torchrun_settings(settings)


#: the launcher's fields that submitit's ``SlurmExecutor`` takes: the layout, by the same
#: name, and the :class:`~mushin_box._slurm.config.SlurmSettings` fields, by their own
_EXECUTOR = {k: k for k in ("nodes", "gpus_per_node", "cpus_per_gpu", "gpus_per_task")} | {
    f.name: f.metadata["executor"] for f in SETTING_FIELDS if f.metadata["executor"]
}


def slurm_parameters(settings: Mapping[str, Any]) -> dict[str, Any]:
    """submitit ``SlurmExecutor`` parameters (sbatch names) for :func:`_settings`' output.

    >>> p = slurm_parameters(_settings("slurm", {"nodes": 2, "tasks_per_node": 4,
    ...                                          "timeout_min": 30, "mem_gb": 64}))
    >>> p["ntasks_per_node"], p["time"], p["mem"], p["additional_parameters"]
    (4, 30, '64GB', {'requeue': True, 'signal': 'B:USR2@120'})
    """
    s = settings
    params: dict[str, Any] = {parameter: s[key] for key, parameter in _EXECUTOR.items()}
    params["ntasks_per_node"] = s["tasks_per_node"]
    if s["mem_gb"] is not None:
        params["mem"] = sbatch_mem(s["mem_gb"])
    extra = dict(s["additional_parameters"])
    if s["requeue_on"] and not {"requeue", "no-requeue", "no_requeue"} & set(extra):
        extra["requeue"] = True
    extra["signal"] = f"B:{REQUEUE_SIGNAL}@{int(s['signal_delay_s'])}"
    params["additional_parameters"] = extra
    trap = requeue_setup_lines(
        requeue_on=s["requeue_on"],
        max_requeues=s["max_requeues"],
        rank_signal=s["rank_signal"],
        signal_delay_s=s["signal_delay_s"],
        timeout_min=s["timeout_min"],
    )
    nodes = [JOB_NODES_SETUP] if s["torchrun"] else []  # the agents' rendezvous host
    params["setup"] = [*nodes, *trap, *(s["setup"] or [])]
    if s["srun_args"]:
        params["srun_args"] = [str(a) for a in s["srun_args"]]
    return {k: v for k, v in params.items() if v is not None}


def render_sbatch(
    params: Mapping[str, Any], folder: str | os.PathLike[str], *, map_count: int | None = None
) -> str:
    """The sbatch script submitit writes for a ``mushin_slurm`` job with ``hydra.launcher``
    values ``params`` (else :class:`SlurmLauncherConf`'s defaults), rendered without
    ``srun``; ``map_count``: of a job array of that many cells.

    >>> text = render_sbatch({"name": "demo", "python": "apptainer exec a.sif python"},
    ...                      "/runs/.submitit/%j")
    >>> "#SBATCH --signal=B:USR2@120" in text and "a.sif python -u -m submitit" in text
    True
    """
    settings = _settings("slurm", params)
    python = task_python(settings) or shlex.quote(sys.executable)
    command = submit_command(python, folder)
    return sbatch_script(command, folder, map_count, **slurm_parameters(settings))


@dataclass
class CellJob:
    """What every srun task runs: one Hydra job (a sweep cell), like the stock launcher's
    ``__call__``. Picklable; holds no submitit or SLURM state. ``ignore_signal``: ``"USR2"``
    under ``mushin_slurm`` (submitit's in-process requeue must not run; the host requeues).
    """

    hydra_context: Any
    config: Any
    task_function: Any
    ignore_signal: str | None

    def __call__(
        self, overrides: Sequence[str], job_dir_key: str, job_num: int, singleton_state: Any
    ) -> Any:
        import submitit
        from hydra.core.singleton import Singleton
        from hydra.core.utils import run_job, setup_globals
        from omegaconf import open_dict

        if self.ignore_signal:
            signal.signal(getattr(signal, f"SIG{self.ignore_signal}"), signal.SIG_IGN)
        # submitit's logger prints through its own handlers; propagated, the job logging Hydra
        # puts on the root prints each of its lines (its end lines) a second time
        submitit_logger = logging.getLogger("submitit")
        submitit_logger.propagate = not submitit_logger.handlers
        Singleton.set_state(singleton_state)
        setup_globals()
        sweep_config = self.hydra_context.config_loader.load_sweep_config(
            self.config, list(overrides)
        )
        environment = submitit.JobEnvironment()
        with open_dict(sweep_config.hydra.job):
            sweep_config.hydra.job.id = environment.job_id
            sweep_config.hydra.job.num = job_num
        ret = run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key=job_dir_key,
            job_subdir_key="hydra.sweep.subdir",
        )
        if environment.global_rank != 0:
            # submitit pickles every task's return (~24 KB a rank with the configs: 100 MB a
            # cell at 4,096 ranks); another rank's is read only for its exception
            ret = dataclasses.replace(ret, cfg=None, hydra_cfg=None)
        return _picklable(ret)


def _picklable(ret: Any) -> Any:
    """``ret``, its exception replaced by a RuntimeError with the traceback when it does not
    pickle (it travels back to the launcher)."""
    exc = job_return_value(ret)
    if isinstance(exc, BaseException):
        import cloudpickle  # pyright: ignore[reportMissingTypeStubs]

        try:
            cloudpickle.loads(cloudpickle.dumps(exc))  # pyright: ignore[reportUnknownMemberType]
        except Exception:
            text = "".join(traceback.format_exception(exc))
            ret.return_value = RuntimeError(f"{type(exc).__qualname__} (not picklable):\n{text}")
    return ret


class SubmititCellLauncher:
    """The logic behind ``hydra/launcher=mushin_slurm`` and ``mushin_local``; ``params``
    (the ``hydra.launcher`` node's values) are checked here, before anything is submitted.

    >>> launcher = SubmititCellLauncher("slurm", {"nodes": 2, "tasks_per_node": 4,
    ...                                           "requeue_on": ["timeout"]})
    >>> launcher.settings["requeue_on"]
    ['timeout']
    >>> SubmititCellLauncher("slurm", {"rank_signal": "USR2"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: rank_signal='USR2': SIGUSR2 is submitit's in-process requeue signal, ...
    """

    def __init__(self, cluster: Literal["slurm", "local"], params: Mapping[str, Any]) -> None:
        from omegaconf import OmegaConf

        plain = {
            str(k): OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in params.items()
        }
        self.cluster = cluster
        self.settings = _settings(cluster, plain)
        self.config: Any = None
        self.hydra_context: Any = None
        self.task_function: Any = None

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def executor(self, sweep_dir: Path | None = None) -> Any:
        """A submitit executor for this launcher's settings; its jobs' ``--comment`` ends
        with the :func:`~mushin_box._slurm.jobs.sweep_mark` of ``sweep_dir``."""
        import submitit

        s = self.settings
        folder, python = s["submitit_folder"], task_python(s)
        if self.cluster == "slurm":
            executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0, python=python)
            executor.update_parameters(**slurm_parameters(s))
            if sweep_dir is not None:
                mark = sweep_mark(sweep_dir)
                user = s["comment"]  # kept: the mark is the comment's last word
                executor.update_parameters(comment=f"{user} {mark}" if user else mark)
            return executor
        executor = submitit.AutoExecutor(folder=folder, cluster="local", local_python=python)
        queue = (f.name for f in dataclasses.fields(_QueueConf) if f.name != "submitit_folder")
        executor.update_parameters(**{k: s[k] for k in queue})
        return executor

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        """Submit one job per cell, wait, return their JobReturns."""
        from hydra.core.singleton import Singleton
        from hydra.core.utils import filter_overrides

        assert self.config is not None, "setup() first"
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep and self.config.hydra.sweep.mode is not None:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        executor = self.executor(sweep_dir.resolve())
        ignore = REQUEUE_SIGNAL if self.cluster == "slurm" else None
        cell = CellJob(self.hydra_context, self.config, self.task_function, ignore)
        overrides = [list(o) for o in job_overrides]
        n = len(overrides)
        numbers = [initial_job_idx + i for i in range(n)]
        columns = [overrides, ["hydra.sweep.dir"] * n, numbers, [Singleton.get_state()] * n]
        detach = bool(self.settings["detach"])

        def record(jobs: list[Any]) -> None:  # every job id, the moment it exists
            pairs = [(str(job.job_id), o) for job, o in zip(jobs, overrides, strict=False)]
            record_submission(sweep_dir, self.cluster, pairs, detached=detach)

        if self.cluster == "slurm":  # one array, or several within the cluster's limit
            parts = arrays.sweep_arrays(self.settings, n)[0]
            jobs = arrays.submit_cells(executor, cell, columns, parts, record)
        else:
            jobs = executor.map_array(cell, *columns)
            for job in jobs if detach else ():  # submitit cancels a local job when its Job
                job.cancel_at_deletion(False)  # object goes away
            record(jobs)
        for number, job, o in zip(numbers, jobs, overrides, strict=True):
            said = " ".join(filter_overrides(o))
            log.info("mushin_%s #%d job %s: %s", self.cluster, number, job.job_id, said)
        if detach:  # nothing to report yet: the cells' sidecars will tell
            return [_job_return(o, None) for o in overrides]
        return self.wait(jobs, overrides)

    def wait(self, jobs: Sequence[Any], overrides: Sequence[Sequence[str]]) -> list[Any]:
        """Poll ``jobs`` until each has a final JobReturn; after ``max_wait_s`` (or when
        interrupted) cancel the others, failed with a TimeoutError."""
        max_wait = self.settings["max_wait_s"]
        deadline = time.monotonic() + (float("inf") if max_wait is None else float(max_wait))
        results: dict[int, Any] = {}
        keep = False  # jobs left running on purpose (Ctrl-C under SLURM)
        try:
            while True:
                for i, job in enumerate(jobs):
                    ret = results.get(i) or self._outcome(job, overrides[i])
                    if ret is not None:
                        results[i] = ret
                if len(results) == len(jobs) or time.monotonic() >= deadline:
                    break
                time.sleep(float(self.settings["poll_interval_s"]))
        except KeyboardInterrupt:
            # a lost terminal must not cost the sweep: SLURM jobs run on, to be followed
            # with `mushin-box wait` and stopped with `mushin-box cancel`
            keep = self.cluster == "slurm" and not self.settings["cancel_on_interrupt"]
            raise
        finally:
            for i, job in enumerate(jobs):
                if i not in results and not keep:
                    job.cancel(check=False)
                    error = TimeoutError(
                        f"mushin_{self.cluster} job {job.job_id} was not done after "
                        f"max_wait_s={max_wait}; cancelled it (logs: {job.paths.stdout})"
                    )
                    results[i] = _job_return(overrides[i], error)
        return [results[i] for i in range(len(jobs))]

    def _active(self, job: Any) -> bool:
        """Can this job still produce a result (SLURM: pending, running, requeued, ...)?"""
        return self.cluster == "slurm" and is_live(
            str(job.watcher.get_state(job.job_id, mode="force"))
        )

    def _outcome(self, job: Any, overrides: Sequence[str]) -> Any:
        """The cell's final JobReturn, or None while it may still change."""
        from hydra.core.utils import JobStatus

        if not job.done():
            return None
        rank0 = job.task(0)
        if rank0.paths.result_pickle.exists():
            # torchrun may still restart the group, whose rank 0 then writes a new result
            if self.settings["torchrun"] and self._active(job):
                return None
            try:
                ret = rank0.result()
            except Exception as error:  # the job raised outside the Hydra job (submitit's trace)
                return None if self._active(job) else _job_return(overrides, error)
            if getattr(ret, "status", None) == JobStatus.COMPLETED or not self._active(job):
                return ret
            return None  # a failure of a run that SLURM has requeued: wait for the next one
        if self._active(job):
            return None
        for task_id in range(1, job.num_tasks):
            task = job.task(task_id)
            if task.paths.result_pickle.exists():
                error = task.exception()
                if error is not None:
                    return _job_return(overrides, error)
        from submitit.core.utils import UncompletedJobError

        message = (
            f"mushin_{self.cluster} job {job.job_id} ended ({job.state}) without a result from "
            f"rank 0; see its logs: {rank0.paths.stdout} and {rank0.paths.stderr}"
        )
        return _job_return(overrides, UncompletedJobError(message))


def _job_return(overrides: Sequence[str], error: BaseException | None) -> Any:
    """A failed JobReturn holding ``error``; None: an empty one, of a detached job."""
    from hydra.core.utils import JobReturn, JobStatus

    status = JobStatus.COMPLETED if error is None else JobStatus.FAILED
    ret = JobReturn(overrides=list(overrides), status=status)
    ret.return_value = error
    return ret
