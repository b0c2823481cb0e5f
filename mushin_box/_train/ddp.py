# SPDX-License-Identifier: MIT
"""``HydraDDP``: Lightning's DDP strategy, made to work inside Hydra jobs.

Without an external launcher, rank 0 is the Hydra job and starts ranks 1..N-1 itself, each
running :mod:`.ddp_child`, which rebuilds the *same* job from what rank 0 wrote down and
calls the same entry point. Stock Lightning re-executes ``sys.argv`` instead, which re-runs
the whole sweep under ``--multirun`` and has nothing to run under ``hydra_zen.launch``.

Under an external launcher (SLURM tasks, torchrun) it starts nothing, after checking that
the launched world size equals ``num_nodes x devices``: a mismatch would hang at rendezvous.
"""

from __future__ import annotations

import atexit
import errno
import functools
import importlib
import inspect
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.distributed as dist

from mushin_box._core import layout
from mushin_box._core.envstate import restore_environ
from mushin_box._core.safeio import UnsafeFileError
from mushin_box._train.ranks import (
    ChildObserver,
    die_with_parent,
    retire_procs,
    say_ready,
    wait_ready,
)
from mushin_box._train.signals import Terminated
from mushin_box._train.world import check_launched_world
from mushin_box._upstream.lightning import NAMESPACES, launcher_base

log = logging.getLogger(__name__)

# variables rank 0 sets for its children; restored afterwards so the next Hydra job in
# the same process (a multirun) does not look "externally launched" (LOCAL_RANK is set)
_DIST_ENV = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


if TYPE_CHECKING:  # the names HydraDDPMixin uses of the strategy it is mixed into
    from lightning_fabric.plugins import ClusterEnvironment
    from pytorch_lightning.strategies import DDPStrategy

    class _Strategy(DDPStrategy):
        mushin_namespace: str
        process_group_timeout_s: float | None

        def configure_launcher(self) -> None: ...
        def set_launcher(self, launcher: Any) -> None: ...

    class _Launcher:
        procs: list[subprocess.Popen[bytes]]
        cluster_environment: ClusterEnvironment
        num_processes: int
        num_nodes: int

        def __init__(self, env: Any, num_processes: int, num_nodes: int) -> None: ...
        def launch(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
        def set_num_threads(self) -> None: ...
else:
    _Strategy = _Launcher = object


def validate_launched_world(
    env: ClusterEnvironment, devices: int, num_nodes: int, namespace: str = "pytorch_lightning"
) -> None:
    """Raise :class:`WorldSizeMismatchError` unless the ranks the launcher announced are
    num_nodes x devices; ``env`` is of Lightning's ``namespace``."""
    envs = importlib.import_module(f"{NAMESPACES[namespace]}.plugins.environments")
    if isinstance(env, envs.SLURMEnvironment):
        per_node = os.environ.get("SLURM_NTASKS_PER_NODE")
        per = int(per_node.split("(")[0]) if per_node and per_node[0].isdigit() else None
        world, source = int(os.environ["SLURM_NTASKS"]), "SLURM_NTASKS"
    elif isinstance(env, envs.TorchElasticEnvironment) or "WORLD_SIZE" in os.environ:
        per_node = os.environ.get("LOCAL_WORLD_SIZE")
        per = int(per_node) if per_node else None
        world, source = int(os.environ["WORLD_SIZE"]), "WORLD_SIZE"
    else:
        world, source, per = env.world_size(), type(env).__name__, None
    check_launched_world(world, source, per, devices=devices, num_nodes=num_nodes)


class HydraDDPMixin(_Strategy):
    """HydraDDP's behaviour, mixed into the ``DDPStrategy`` of either Lightning namespace;
    its launchers are of the strategy's namespace (:func:`launcher_classes`)."""

    def __init__(
        self,
        *args: Any,
        child_exit_timeout_s: float = 120.0,
        rendezvous_timeout_s: float | None = 300.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.child_exit_timeout_s = child_exit_timeout_s
        if rendezvous_timeout_s is not None and not rendezvous_timeout_s > 0:
            raise ValueError(
                f"rendezvous_timeout_s must be > 0 or None, got {rendezvous_timeout_s}"
            )
        self.rendezvous_timeout_s = rendezvous_timeout_s

    def setup_distributed(self) -> None:
        # the watchdog is armed in ranks launched as their own process, not in rank 0 of a
        # local job (maybe the user's process; the child observer bounds its wait). Its
        # LOCAL_RANK reads as "launched externally", so the launcher's type decides.
        env = self.cluster_environment
        launcher = self.launcher
        own_process = (
            env is not None
            and env.creates_processes_externally
            and not isinstance(launcher, HydraDDPLauncher)
        )
        if isinstance(launcher, HydraDDPLauncher):  # a stop is heard while its ranks start
            timeout = self.process_group_timeout_s
            launcher.wait_for_ranks(1800.0 if timeout is None else timeout)
        if own_process:
            say_ready()  # a rank HydraDDP started: rank 0 may now enter the rendezvous
        if self.rendezvous_timeout_s is None or not own_process:
            super().setup_distributed()
            return
        joined = threading.Event()
        threading.Thread(
            target=_rendezvous_watchdog,
            args=(joined, self.rendezvous_timeout_s, self),
            daemon=True,
            name="mushin-rendezvous",
        ).start()
        try:
            super().setup_distributed()
        finally:
            joined.set()

    def configure_launcher(self) -> None:
        env = self.cluster_environment
        assert env is not None
        if env.creates_processes_externally:
            # steps aside: the stock launcher spawns nothing for external environments
            validate_launched_world(
                env, self.num_processes, self.num_nodes, namespace=self.mushin_namespace
            )
            super().configure_launcher()
            return
        from hydra.core.hydra_config import HydraConfig

        one_process, hydra_job = launcher_classes(self.mushin_namespace)
        if self.num_processes < 2:
            # one process, nothing to start: Lightning's launcher, but leaving no trace
            self.set_launcher(one_process(env, self.num_processes, self.num_nodes))
            return
        if not HydraConfig.initialized():
            super().configure_launcher()  # not a Hydra job: Lightning's own behaviour
            return
        launcher = hydra_job(env, self.num_processes, self.num_nodes)
        launcher.child_exit_timeout_s = self.child_exit_timeout_s
        self.set_launcher(launcher)

    def teardown(self) -> None:
        super().teardown()
        launcher = self.launcher
        if isinstance(launcher, (HydraDDPLauncher, OneProcessLauncher)):
            launcher.end_call()

    # SIGTERM: Lightning answers it with a dist.broadcast from its signal handler, which the
    # other ranks never join, and a local job hangs (Lightning-AI/pytorch-lightning#20806).
    # These hooks run after the trainer call registered Lightning's handler (restored when
    # the call ends) and replace it in the ranks of a local job.
    def on_train_start(self) -> None:
        super().on_train_start()
        self._take_sigterm()

    def on_validation_start(self) -> None:
        super().on_validation_start()
        self._take_sigterm()

    def on_test_start(self) -> None:
        super().on_test_start()
        self._take_sigterm()

    def on_predict_start(self) -> None:
        super().on_predict_start()
        self._take_sigterm()

    def _take_sigterm(self) -> None:
        local_job = isinstance(self.launcher, HydraDDPLauncher) or bool(
            os.environ.get(layout.DDP_PARENT_PID_ENV)
        )
        if local_job and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        """Raise :class:`Terminated`; rank 0 first forwards SIGTERM to its ranks, which its
        teardown kills after ``TERM_GRACE_S`` (:meth:`HydraDDPLauncher.end_call`)."""
        launcher = self.launcher
        if isinstance(launcher, HydraDDPLauncher):
            launcher.stop_ranks()
        raise Terminated(signum)


def _rendezvous_watchdog(joined: threading.Event, timeout_s: float, strategy: Any) -> None:
    if joined.wait(timeout_s):
        return
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    sys.stderr.write(
        f"mushin-box HydraDDP: rank {strategy.global_rank} of {strategy.world_size} could not "
        f"join the process group at MASTER_ADDR:MASTER_PORT = {where} within "
        f"{timeout_s:g} s (rendezvous_timeout_s). Check that the address resolves and is "
        "reachable from this node, that the port is free and the same on every rank, and "
        "that every rank was started; exiting instead of waiting torch's 30 minutes.\n"
    )
    sys.stderr.flush()
    os._exit(1)  # the main thread is blocked in C++: nothing else can end it


# the launcher whose ranks are alive in this process (rank 0 leads one job at a time)
_current_launcher: HydraDDPLauncher | None = None


def end_local_job() -> None:
    """End the local HydraDDP job led from this process, if any (its ranks, process group
    and variables), so that the next job in this process starts clean."""
    if _current_launcher is not None:
        _current_launcher.retire()


class OneProcessLauncher(_Launcher):
    """Lightning's launcher for a 1-process local run, undoing what the call set when it
    ends: a ``LOCAL_RANK=0`` left behind would make the next local run in this process,
    even with ``devices=2``, silently train alone on a stale 1-process group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._saved_env: dict[str, str | None] | None = None
        self._owns_group = False

    def launch(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        end_local_job()  # a previous job's ranks and process group: not this run's
        self._saved_env = {k: os.environ.get(k) for k in _DIST_ENV}
        self._owns_group = not (dist.is_available() and dist.is_initialized())
        return super().launch(function, *args, **kwargs)

    def end_call(self) -> None:
        if self._saved_env is not None:
            restore_environ(self._saved_env)
            self._saved_env = None
        if self._owns_group and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        self._owns_group = False


#: after SIGTERM, how long rank 0's teardown gives the ranks it started before SIGKILL
TERM_GRACE_S = 5.0


class HydraDDPLauncher(_Launcher):
    """Starts ranks 1..N-1 once per job and sends them every trainer call rank 0 makes (a
    JSON line on their stdin): ``fit`` then ``test`` run on the same processes."""

    child_exit_timeout_s: float = 120.0
    #: rank 0 got SIGTERM and forwarded it: the ranks end with the call
    terminating: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._saved_env: dict[str, str | None] = {}
        self._trainer: Any = None
        self._observer: ChildObserver | None = None
        self._ready_fds: list[int] = []  # the started ranks' ready pipes, until they joined
        self._logs: list[Path] = []

    def launch(
        self, function: Callable[..., Any], *args: Any, trainer: Any = None, **kwargs: Any
    ) -> Any:
        global _current_launcher
        self.cluster_environment.validate_settings(
            num_devices=self.num_processes, num_nodes=self.num_nodes
        )
        assert trainer is not None
        self._trainer = trainer
        spec, call = _child_spec(function, args, kwargs, trainer)  # validates before spawning
        if _current_launcher is not None and _current_launcher is not self:
            _current_launcher.retire()  # another job's ranks and process group
        self._set_dist_env()
        if not self.procs or any(p.poll() is not None for p in self.procs):
            self._spawn_children(spec)
            _current_launcher = self
            weakref.finalize(trainer, retire_procs, list(self.procs), self.child_exit_timeout_s)
        line = (json.dumps(call) + "\n").encode()
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(line)
            proc.stdin.flush()
        self.set_num_threads()
        return function(*args, **kwargs)

    def _set_dist_env(self) -> None:
        env = self.cluster_environment
        self._saved_env = {k: os.environ.get(k) for k in _DIST_ENV}
        os.environ["MASTER_ADDR"] = env.main_address
        os.environ["MASTER_PORT"] = str(env.main_port)
        os.environ["NODE_RANK"] = str(env.node_rank())
        os.environ["LOCAL_RANK"] = str(env.local_rank())
        os.environ["WORLD_SIZE"] = str(self.num_processes * self.num_nodes)

    def _restore_env(self) -> None:
        restore_environ(self._saved_env)
        self._saved_env = {}

    def _spawn_children(self, spec: dict[str, Any]) -> None:
        if self.cluster_environment.local_rank() != 0:
            raise RuntimeError("HydraDDP: only local rank 0 starts the other ranks")
        self.procs = []
        self._close_ready_fds()
        env = self.cluster_environment
        logs = []
        for local_rank in range(1, self.num_processes):
            global_rank = env.node_rank() * self.num_processes + local_rank
            child_env = os.environ.copy()
            child_env["LOCAL_RANK"] = str(local_rank)
            child_env[layout.GLOBAL_RANK_ENV] = str(global_rank)
            ready_read, ready_write = os.pipe()  # the rank says "joining" on it
            self._ready_fds.append(ready_read)
            child_env[layout.DDP_SPEC_ENV] = json.dumps({**spec, "ready_fd": ready_write})
            child_env[layout.DDP_PARENT_PID_ENV] = str(os.getpid())
            child_env[layout.JOB_DIR_ENV] = spec["job_dir"]
            # a rank's output goes to its file in the cell, not through rank 0's terminal,
            # where it would tear the progress bar (`mushin-box logs` reads the files)
            logs.append(
                Path(spec["job_dir"]) / layout.RANK_LOG_DIR / layout.rank_log_file(global_rank)
            )
            logs[-1].parent.mkdir(parents=True, exist_ok=True)
            try:
                with os.fdopen(_open_log(logs[-1]), "ab") as output:
                    self.procs.append(
                        subprocess.Popen(
                            [sys.executable, "-m", "mushin_box._train.ddp_child"],
                            env=child_env,
                            cwd=spec["cwd"],
                            stdin=subprocess.PIPE,
                            stdout=output,
                            stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent,
                            pass_fds=(ready_write,),
                        )
                    )
            finally:  # the rank holds the only write end: its exit closes the pipe
                os.close(ready_write)
        self._logs = logs
        ranks = "rank 1" if len(logs) == 1 else f"ranks 1-{len(logs)}"
        log.info("HydraDDP: the output of %s goes to %s", ranks, logs[0].parent)
        self._observer = ChildObserver(self.procs, logs)
        self._observer.start()

    def wait_for_ranks(self, timeout_s: float) -> None:
        """Before rank 0 joins the process group (a C++ wait deaf to signals), wait in Python
        for the ranks it just started to be joining; a stop here stops them too."""
        fds, self._ready_fds = self._ready_fds, []
        if not fds:
            return
        try:
            wait_ready(self.procs, fds, self._logs, timeout_s)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # a stop (SIGTERM, Ctrl-C): theirs too
                self.stop_ranks()
            raise

    def stop_ranks(self) -> None:
        """Rank 0 got SIGTERM: forward it to the ranks it started (:meth:`end_call` kills
        them after ``TERM_GRACE_S``)."""
        self.terminating = True
        if self._observer is not None:
            self._observer.stop()  # their exits are expected now: not a failure
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def _close_ready_fds(self) -> None:
        fds, self._ready_fds = self._ready_fds, []
        for fd in fds:
            os.close(fd)

    def end_call(self) -> None:
        """End of a trainer call of rank 0: the ranks stay for the job's next call, unless
        the call failed (killed at once) or ended by SIGTERM (after ``TERM_GRACE_S``)."""
        if self.terminating:
            self.terminating = False
            retire_procs(self.procs, TERM_GRACE_S, quiet=True)
            self.retire(kill=True)
        elif self._trainer is not None and self._trainer.state.status == "interrupted":
            self.retire(kill=True)  # the call failed
        else:
            self._restore_env()  # the next job in this process: not externally launched

    def retire(self, kill: bool = False) -> None:
        """End this job's ranks: close their command pipe, wait (bounded), kill stragglers."""
        global _current_launcher
        if self._observer is not None:
            self._observer.stop()
        self._close_ready_fds()
        retire_procs(self.procs, 0.0 if kill else self.child_exit_timeout_s)
        self.procs = []
        self._restore_env()
        if _current_launcher is self:
            _current_launcher = None
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


@functools.cache
def launcher_classes(namespace: str) -> tuple[type[OneProcessLauncher], type[HydraDDPLauncher]]:
    """(one-process, Hydra job) launcher classes on ``namespace``'s launcher base, whose
    ranks the Trainer kills on Ctrl-C."""
    base = launcher_base(namespace)
    return (
        type("OneProcessLauncher", (OneProcessLauncher, base), {"__module__": __name__}),
        type("HydraDDPLauncher", (HydraDDPLauncher, base), {"__module__": __name__}),
    )


def _open_log(path: Path) -> int:
    """``path`` opened to append; a link planted as it or as its folder is refused, not
    followed: the sweep directory is untrusted."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            return os.open(path.name, flags, 0o666, dir_fd=folder)
        finally:
            os.close(folder)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        raise UnsafeFileError(
            f"{path}: it or its folder is a symbolic link, not followed: remove the link and "
            "run the cell again"
        ) from None


@atexit.register
def _retire_at_exit() -> None:
    if _current_launcher is not None:
        retire_procs(_current_launcher.procs, _current_launcher.child_exit_timeout_s)


def _child_spec(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], trainer: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(job spec, this call): what the ranks need to rebuild the job and repeat the call;
    a ``RuntimeError`` for a job they could not rebuild."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    if hydra_cfg.output_subdir is None:
        raise RuntimeError(
            "HydraDDP needs the job's saved config to start its other ranks, but "
            "hydra.output_subdir is null. Fix: leave hydra.output_subdir at its default (.hydra)."
        )
    config_dir = job_dir / hydra_cfg.output_subdir
    config_file = config_dir / "config.yaml"
    if not config_file.is_file():
        raise RuntimeError(f"HydraDDP: the job's config {config_file} does not exist")
    cfg = OmegaConf.load(config_file)
    missing = [k for k in ("trainer", "module") if k not in cfg]
    if missing:
        raise RuntimeError(
            f"HydraDDP starts its other ranks from the job config's top-level `trainer` and "
            f"`module` nodes (and optional `datamodule`), but the config lacks {missing} "
            f"(it has {sorted(map(str, cfg.keys()))}). Fix: name the nodes `trainer`, `module`"
            " and `datamodule`, or launch the ranks externally (torchrun, SLURM tasks)."
        )
    stage = str(trainer.state.fn.value if trainer.state.fn is not None else "fit")
    if stage not in ("fit", "validate", "test", "predict"):
        raise RuntimeError(f"HydraDDP cannot start ranks for trainer entry point {stage!r}")
    try:
        bound = inspect.signature(function).bind(*args, **kwargs).arguments
    except TypeError:
        bound = dict(kwargs)
    ckpt = bound.get("ckpt_path")
    main_file = None
    if "__main__." in config_file.read_text(encoding="utf-8"):
        main = sys.modules.get("__main__")
        main_file = getattr(main, "__file__", None)
        if main_file is None:
            raise RuntimeError(
                "The job config has `_target_`s defined in __main__, which HydraDDP's other "
                "ranks cannot import from an interactive session. Fix: move those classes "
                "and functions into an importable module."
            )
        main_file = str(Path(main_file).resolve())
    spec = {
        "job_dir": str(job_dir),
        "config_dir": str(config_dir),
        "seed_base": os.environ.get(layout.SEED_BASE_ENV),
        "seed_workers": os.environ.get(layout.SEED_WORKERS_ENV, "1") == "1",
        "main_file": main_file,
        "sys_path": [p for p in sys.path if p],
        "cwd": os.getcwd(),
    }
    call = {
        "stage": stage,
        "ckpt_path": None if ckpt is None else str(ckpt),
        "weights_only": bound.get("weights_only"),
    }
    return spec, call
