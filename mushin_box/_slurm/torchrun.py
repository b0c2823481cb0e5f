# SPDX-License-Identifier: MIT
"""A cell's ranks as torchrun workers: the ``torchrun`` setting of ``mushin_local``
(``--standalone``) and of ``mushin_slurm`` (one agent per node, c10d rendezvous).

Only the process each task starts differs from a plain cell: submitit starts ONE task per
node whose "python" is this module's agent (:func:`task_python`), which runs torchrun in
its own process under the interpreter's torch and notes how each failed worker ended
(:func:`_note_exit`: a worker killed by a signal writes nothing). Each worker runs the
pickled Hydra job as submitit's task ``RANK``; rank 0's result is the cell's ``JobReturn``.

On SLURM every agent derives the same rendezvous from the job's variables (its first node,
:data:`JOB_NODES_SETUP`, since an image has no ``scontrol``; the port, :data:`RDZV_PORT`).
A worker presents torchrun's world as ``SLURM_*`` task variables, its node
(:func:`_group_nodes`) and its group's restart count (:func:`present_group_restarts`); a
restarted group resumes from ``last.ckpt``.

>>> words = task_python({"python": "/venv/bin/python", "torchrun": True, "nproc_per_node": 2,
...                      "max_restarts": 1}).split()
>>> words[1:5], words[-2:]
(['-m', 'mushin_box._slurm.torchrun', 'agent', '--nproc-per-node'], ['--max-restarts', '1'])
>>> torchrun_argv(["--nproc-per-node", "2", "--max-restarts", "1", *SUBMIT_ARGS,
...                "/s/.submitit/%j"], python="py")[3:8]
['--standalone', '--nproc-per-node', '2', '--max-restarts', '1']
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import shlex
import socket
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from mushin_box._container.launchspec import MasterPort
from mushin_box._core import layout
from mushin_box._core.sidecars import write_json_atomic, write_text_atomic
from mushin_box._slurm.jobs import slurm_job_id
from mushin_box._upstream.submitit import SUBMIT_ARGS
from mushin_box._upstream.torch import worker_failures

MODULE = "mushin_box._slurm.torchrun"
#: the c10d rendezvous port of a SLURM job: 25000 + the job id's last four digits, clear of
#: the ranks' own ``MASTER_PORT`` range (15000 + the same digits), so jobs sharing a node differ
RDZV_PORT = MasterPort(base=25000)
_NODES_TIMEOUT_S = 120.0  # rank 0's wait for the other nodes' names (the record only)
_STANDALONE_ENDPOINT = "localhost:0"  # torchrun --standalone: c10d on a free local port
_ROUND_PREFIX = ".mushin-round-"  # a round of the worker group, in the job's submitit folder
_EXITS_DIR = ".mushin-exits"  # the agents' notes of their failed workers, beside the rounds


def parse_nnodes(text: str) -> tuple[int, int]:
    """``(min, max)`` nodes of ``N`` or ``MIN:MAX`` (torchrun's ``--nnodes``).

    >>> parse_nnodes("2"), parse_nnodes("1:4")
    ((2, 2), (1, 4))
    >>> parse_nnodes("4:2")
    Traceback (most recent call last):
        ...
    ValueError: nodes '4:2': MIN (4) is more than MAX (2); write MIN:MAX, e.g. 2:4
    """
    lo, sep, hi = str(text).strip().partition(":")
    try:
        low, high = int(lo), int(hi if sep else lo)
    except ValueError:
        raise ValueError(
            f"nodes {text!r} is not N or MIN:MAX (positive integers, e.g. 2 or 2:4)"
        ) from None
    if low < 1:
        raise ValueError(f"nodes {text!r}: the node counts must be positive integers")
    if low > high:
        raise ValueError(
            f"nodes {text!r}: MIN ({low}) is more than MAX ({high}); write MIN:MAX, e.g. 2:4"
        )
    return low, high


def _nnodes(text: str) -> str:
    low, high = parse_nnodes(text)
    return f"{low}:{high}" if low != high else str(low)


def check_torchrun_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings``, its torchrun fields checked (one submitit task per node; on SLURM
    ``min_nodes`` within ``1..nodes``)."""
    for key, least in (("nproc_per_node", 1), ("max_restarts", 0)):
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{key} must be an int >= {least}, got {value!r}")
    if not isinstance(settings["torchrun"], bool):
        raise ValueError(f"torchrun must be true or false, got {settings['torchrun']!r}")
    low = settings.get("min_nodes")
    if not settings["torchrun"]:
        if (settings["nproc_per_node"], settings["max_restarts"], low) != (1, 0, None):
            raise ValueError(
                "nproc_per_node, max_restarts and min_nodes configure torchrun: set torchrun=true"
            )
    elif settings["tasks_per_node"] != 1:
        raise ValueError(
            "torchrun=true starts nproc_per_node workers itself: leave tasks_per_node at 1"
        )
    if low is not None and (
        isinstance(low, bool) or not isinstance(low, int) or not 1 <= low <= settings["nodes"]
    ):
        raise ValueError(f"min_nodes must be an int in 1..nodes ({settings['nodes']}), got {low!r}")
    return settings


def torchrun_launcher_fields(
    config: Mapping[str, Any], *, max_restarts: int = 0, min_nodes: int | None = None
) -> dict[str, Any]:
    """``submitit_slurm_config``'s fields (one task per GPU) as one torchrun agent per node,
    whose one task holds the node's GPUs and ``gpus x cpus_per_task`` CPUs. ``min_nodes``
    (below ``nodes``): ``--nnodes MIN:MAX``, with ``--kill-on-bad-exit=0`` so that srun
    leaves the other nodes running for torchrun to re-form the group.

    >>> fields = torchrun_launcher_fields(
    ...     {"nodes": 2, "tasks_per_node": 4, "gpus_per_node": 4, "cpus_per_task": 2},
    ...     max_restarts=1)
    >>> fields  # doctest: +NORMALIZE_WHITESPACE
    {'nodes': 2, 'tasks_per_node': 1, 'gpus_per_node': 4, 'cpus_per_task': 8,
     'torchrun': True, 'nproc_per_node': 4, 'max_restarts': 1, 'rank_signal': 'TERM'}
    """
    out = dict(config)
    gpus = out["gpus_per_node"]
    out["tasks_per_node"] = 1
    if out.get("cpus_per_task") is not None:
        out["cpus_per_task"] = out["cpus_per_task"] * gpus
    out.update(torchrun=True, nproc_per_node=gpus, max_restarts=max_restarts)
    # before a requeue the trap signals the agents: torchrun stops its workers on TERM (on
    # USR1, the launcher's default for ranks, it would end at once, leaving them to srun)
    out.setdefault("rank_signal", "TERM")
    if min_nodes is not None and min_nodes != out["nodes"]:
        out["min_nodes"] = min_nodes
        srun = [a for a in out.get("srun_args") or [] if not a.startswith("--kill-on-bad-exit")]
        out["srun_args"] = [*srun, "--kill-on-bad-exit=0"]
    check_torchrun_settings({"min_nodes": None, **out})
    return out


def task_python(settings: Mapping[str, Any]) -> str | None:
    """submitit's ``python`` for a launcher's settings: ``python``, or for torchrun this
    module's agent run by ``python`` (a quoted command line; default this interpreter), with
    ``--nnodes MIN:MAX`` under ``mushin_slurm`` (``--standalone`` under ``mushin_local``).

    >>> task_python({"python": "py", "torchrun": True, "nproc_per_node": 4, "max_restarts": 0,
    ...              "min_nodes": 1, "nodes": 2}).split()[3:]
    ['agent', '--nproc-per-node', '4', '--max-restarts', '0', '--nnodes', '1:2']
    """
    python = settings["python"]
    if not settings.get("torchrun"):
        return python
    words = [python or shlex.quote(sys.executable), "-m", MODULE, "agent"]
    words += ["--nproc-per-node", str(int(settings["nproc_per_node"]))]
    words += ["--max-restarts", str(int(settings["max_restarts"]))]
    if "min_nodes" in settings:  # mushin_slurm
        nodes = settings["nodes"]
        words += ["--nnodes", _nnodes(f"{settings['min_nodes'] or nodes}:{nodes}")]
    return " ".join(words)


#: the batch-script line (host side, before srun) that exports the job's nodes in order
JOB_NODES_SETUP = (
    f'export {layout.JOB_NODES_ENV}=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)'
)


def job_nodes(env: Mapping[str, str]) -> list[str]:
    """The job's node names in the node list's order (:data:`JOB_NODES_SETUP` exported them).

    >>> job_nodes({"MUSHIN_JOB_NODES": "gpu07,gpu08"}), job_nodes({})
    (['gpu07', 'gpu08'], [])
    """
    return [name for name in env.get(layout.JOB_NODES_ENV, "").split(",") if name]


def rendezvous_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """``{"backend", "endpoint", "id"}`` of a SLURM job's torchrun agents, the same on
    every node.

    >>> rendezvous_from_env({"SLURM_JOB_ID": "1234", "MUSHIN_JOB_NODES": "gpu07,gpu08"})
    {'backend': 'c10d', 'endpoint': 'gpu07:26234', 'id': '1234'}
    >>> rendezvous_from_env({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10",
    ...                      "SLURM_ARRAY_TASK_ID": "2", "MUSHIN_JOB_NODES": "n1"})["id"]
    '10_2'
    """
    first = job_nodes(env)[:1]
    job = env.get("SLURM_JOB_ID")
    if not first or not job or not job.isdigit():
        raise ValueError(
            f"a torchrun agent with --nnodes runs in a SLURM job step: SLURM_JOB_ID and "
            f"{layout.JOB_NODES_ENV} are not set here (the batch script exports "
            f"{layout.JOB_NODES_ENV} with: {JOB_NODES_SETUP})"
        )
    endpoint = f"{first[0]}:{RDZV_PORT.port_of(job)}"
    return {"backend": "c10d", "endpoint": endpoint, "id": slurm_job_id(env) or job}


def slurm_rank_logs(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{"rank<r>.out": path, "rank<r>.err": path}`` for every task of this submitit SLURM
    job (``{}`` outside one), as submitit names the files (``JobPaths``): a cell records them
    in its status, so that ``mushin-box logs`` finds every rank's output from the cell alone.
    A SLURM torchrun cell has one task per node: its file is listed under the node's first
    rank.

    >>> logs = slurm_rank_logs({"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_FOLDER": "/s/%j",
    ...                         "SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"})
    >>> logs["rank1.err"]
    '/s/7/7_1_log.err'
    >>> slurm_rank_logs({})
    {}
    >>> sorted(slurm_rank_logs({"SUBMITIT_EXECUTOR": "slurm", "SUBMITIT_FOLDER": "/s/%j",
    ...     "SLURM_JOB_ID": "7", "MUSHIN_JOB_NODES": "n1,n2", "LOCAL_WORLD_SIZE": "2",
    ...     "MUSHIN_RDZV_NODES": "n2,n1"}).items())[:2]  # group 0 ran on n2: task 1's file
    [('rank0.err', '/s/7/7_1_log.err'), ('rank0.out', '/s/7/7_1_log.out')]
    """
    env = os.environ if environ is None else environ
    folder = env.get("SUBMITIT_FOLDER")
    if env.get("SUBMITIT_EXECUTOR") != "slurm" or not folder or not env.get("SLURM_JOB_ID"):
        return {}
    from submitit.core.utils import JobPaths

    job = slurm_job_id(env)  # SLURM_JOB_ID is set: never None
    try:
        tasks = max(1, int(env.get("SLURM_NTASKS", "1")))
    except ValueError:
        tasks = 1
    ranks = {task: task for task in range(tasks)}
    by_group = [n for n in env.get(layout.RDZV_ENV["nodes"], "").split(",") if n]
    if by_group and env.get("LOCAL_WORLD_SIZE", "").isdigit():  # SLURM torchrun
        order = job_nodes(env)
        per = int(env["LOCAL_WORLD_SIZE"])
        ranks = {g * per: order.index(n) for g, n in enumerate(by_group) if n in order}
    out: dict[str, str] = {}
    for rank, task in ranks.items():
        paths = JobPaths(folder, job_id=job, task_id=task)
        out[f"rank{rank}.out"] = str(paths.stdout)
        out[f"rank{rank}.err"] = str(paths.stderr)
    return out


def torchrun_argv(
    argv: Sequence[str],
    *,
    python: str | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> list[str]:
    """The torchrun command line of the agent's arguments (its flags, then submitit's
    ``-u -m submitit.core._submit FOLDER``); the rendezvous is exported to ``environ``.

    >>> env = {"SLURM_JOB_ID": "7", "MUSHIN_JOB_NODES": "n1,n2"}
    >>> argv = torchrun_argv(["--nproc-per-node", "2", "--nnodes", "2", *SUBMIT_ARGS, "/f"],
    ...                      python="py", environ=env)
    >>> " ".join(argv[3:])  # doctest: +NORMALIZE_WHITESPACE
    '--nnodes 2 --nproc-per-node 2 --max-restarts 0 --rdzv-backend c10d
     --rdzv-endpoint n1:25007 --rdzv-id 7 -m mushin_box._slurm.torchrun worker --slurm /f'
    >>> env["MUSHIN_RDZV_ENDPOINT"]
    'n1:25007'
    """
    env = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE} agent")
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--max-restarts", type=int, default=0)
    parser.add_argument("--nnodes", default=None)
    own, rest = parser.parse_known_args(list(argv))
    if len(rest) != len(SUBMIT_ARGS) + 1 or tuple(rest[:-1]) != SUBMIT_ARGS:
        parser.error(f"expected {' '.join(SUBMIT_ARGS)} FOLDER after the flags, got {rest!r}")
    if own.nproc_per_node < 1 or own.max_restarts < 0:
        parser.error("--nproc-per-node must be >= 1 and --max-restarts >= 0")
    counts = ["--nproc-per-node", str(own.nproc_per_node), "--max-restarts", str(own.max_restarts)]
    worker = ["-m", MODULE, "worker"]
    if own.nnodes is None:
        rdzv = {"backend": "c10d", "endpoint": _STANDALONE_ENDPOINT}
        words = ["--standalone", *counts]
    else:
        try:
            nnodes = _nnodes(own.nnodes)
            rdzv = rendezvous_from_env(env)
        except ValueError as exc:
            parser.error(str(exc))
        words = ["--nnodes", nnodes, *counts, "--rdzv-backend", rdzv["backend"]]
        words += ["--rdzv-endpoint", rdzv["endpoint"], "--rdzv-id", rdzv["id"]]
        worker.append("--slurm")
    env.update({layout.RDZV_ENV[key]: value for key, value in rdzv.items()})
    return [python or sys.executable, "-m", "torch.distributed.run", *words, *worker, rest[-1]]


def _present_slurm_world(env: MutableMapping[str, str]) -> None:
    """Make the inherited SLURM task variables say what torchrun says (task ``RANK`` of
    ``WORLD_SIZE``, on node ``GROUP_RANK``), so submitit's task rank and result file agree
    with torchrun. The node name and the job's node list stay as SLURM set them."""
    world, per, groups = env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["GROUP_WORLD_SIZE"]
    tasks_per_node = f"{per}(x{groups})" if groups != "1" else per
    env.update(
        SLURM_PROCID=env["RANK"],
        SLURM_LOCALID=env["LOCAL_RANK"],
        SLURM_NODEID=env["GROUP_RANK"],
        SLURM_NTASKS=world,
        SLURM_NPROCS=world,
        SLURM_STEP_NUM_TASKS=world,
        SLURM_NTASKS_PER_NODE=per,
        SLURM_TASKS_PER_NODE=tasks_per_node,
        SLURM_STEP_TASKS_PER_NODE=tasks_per_node,
    )


def _job_dir(folder: str, env: Mapping[str, str]) -> Path:
    from submitit.core.utils import JobPaths

    return JobPaths(folder, job_id=slurm_job_id(env)).folder


def _note_exit(where: Path, exitcode: int, local_rank: int, pid: int) -> None:
    """Keep how a failed worker ended as ``<pid>.json`` in ``where``: the reaping agent is
    the one witness of a worker killed by a signal, and the restarted cell's rank 0 names it
    from this note (:func:`~mushin_box._provenance.ranks.restart_cause`)."""
    note = {"exitcode": exitcode, "local_rank": local_rank, "pid": pid}
    try:
        write_json_atomic(where / f"{pid}.json", note)
    except OSError:  # the note is a courtesy: torchrun goes on
        pass


def _requeues(env: Mapping[str, str]) -> str:
    return re.sub(r"[^0-9]", "_", env.get("SLURM_RESTART_COUNT") or "0")


def present_group_restarts(folder: str, env: MutableMapping[str, str]) -> Path:
    """Set ``TORCHELASTIC_RESTART_COUNT`` to the rounds this worker group had before this
    one in this run of the job, the same on every node; returns this round's directory.

    torchrun counts per agent (an agent whose workers were healthy keeps its count), so the
    workers would disagree on whether to resume. Each marks its round (a directory in the
    job's shared folder) before the cell starts; a round is one rendezvous, whose workers
    share ``MASTER_ADDR:MASTER_PORT`` (rank 0's agent picks a free port each round).
    """
    words = [_requeues(env), env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", "")]
    name = "-".join(re.sub(r"[^A-Za-z0-9.]", "_", w) for w in words)
    here = _job_dir(folder, env) / f"{_ROUND_PREFIX}{name}"
    try:
        here.mkdir(parents=True, exist_ok=True)
        this_run = f"{_ROUND_PREFIX}{_requeues(env)}-"
        earlier = [p for p in here.parent.iterdir() if p.name.startswith(this_run) and p != here]
        env["TORCHELASTIC_RESTART_COUNT"] = str(len(earlier))
    except OSError as exc:  # torchrun's own count stays
        print(f"mushin-box: this torchrun round could not be marked: {exc}", flush=True)
    return here


def _group_nodes(where: Path, env: Mapping[str, str]) -> list[str] | None:
    """The node name of each torchrun group rank, for rank 0's record (None elsewhere, or
    when a node did not say in time). Each node's local rank 0 writes its name to
    ``where``, this round's directory; rank 0 reads them back: torchrun numbers nodes in
    join order, not in SLURM's node order."""
    own = env.get("SLURMD_NODENAME") or socket.gethostname()
    groups, group = int(env["GROUP_WORLD_SIZE"]), int(env["GROUP_RANK"])
    if groups == 1:
        return [own]
    try:
        if env["LOCAL_RANK"] == "0":
            write_text_atomic(where / str(group), own)
        if env["RANK"] != "0":
            return None
        deadline = time.monotonic() + _NODES_TIMEOUT_S
        while True:
            names = [where / str(g) for g in range(groups)]
            if all(p.is_file() for p in names):
                return [p.read_text(encoding="utf-8").strip() for p in names]
            if time.monotonic() > deadline:
                raise TimeoutError(f"not every node wrote its name to {where}")
            time.sleep(0.2)
    except OSError as exc:  # the record only: training goes on
        print(f"mushin-box: the node of each torchrun group rank is unknown: {exc}", flush=True)
        return None


def _worker(folder: str, *, slurm: bool) -> None:
    """Run the cell's pickled job as submitit's task ``RANK``; exit 1 when the cell failed
    here. Hydra returns a task's exception inside the ``JobReturn``, so the worker would exit
    0 and its agent wait at the exit barrier for peers stuck in a collective: a failure must
    reach torchrun, which stops (and may restart) the group."""
    from hydra.core.utils import JobStatus
    from submitit import JobEnvironment
    from submitit.core.submission import process_job
    from submitit.core.utils import pickle_load

    env = os.environ
    env.setdefault(layout.RDZV_ENV["id"], env.get("TORCHELASTIC_RUN_ID", ""))
    env[layout.TORCHRUN_AGENT_ENV] = str(os.getppid())  # the cell's owner (cancel stops the agent)
    if slurm:
        _present_slurm_world(env)
        nodes = _group_nodes(present_group_restarts(folder, env), env)
        if nodes is not None:
            env[layout.RDZV_ENV["nodes"]] = ",".join(nodes)
    else:
        env["SUBMITIT_LOCAL_GLOBALID"] = env.get("RANK", "0")
        env["SUBMITIT_LOCAL_LOCALID"] = env.get("LOCAL_RANK", "0")
    env.pop(layout.CELL_FAILED_ENV, None)
    process_job(folder)
    outcome = pickle_load(JobEnvironment().paths.result_pickle)
    # under on_error="nan" a failed cell's job returns normally: its runner says it failed
    if getattr(outcome[1], "status", None) == JobStatus.FAILED or env.get(layout.CELL_FAILED_ENV):
        # at once: the interpreter's exit would tear down the process group, which can block
        # on a peer that died, and torchrun would wait for this worker instead of restarting
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["agent"]:
        command = torchrun_argv(args[1:])
        # torch shares the rendezvous store with the workers' process group, and a restarted
        # group reads the last attempt's addresses from it (pytorch/pytorch#135712)
        os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
        exits = _job_dir(args[-1], os.environ) / _EXITS_DIR
        os.environ[layout.TORCHRUN_EXITS_ENV] = str(exits)  # the workers read the notes
        # torchrun runs in this process, the submitit task (signals reach it), as `python -m
        # torch.distributed.run` would: by the module's name, under this interpreter's torch
        sys.argv = [command[2], *command[3:]]
        with worker_failures(partial(_note_exit, exits)):
            runpy.run_module(command[2], run_name="__main__", alter_sys=True)
    elif args[:1] == ["worker"] and len(args) == 2:
        _worker(args[1], slurm=False)
    elif args[:2] == ["worker", "--slurm"] and len(args) == 3:
        _worker(args[2], slurm=True)
    else:
        sys.exit(f"usage: python -m {MODULE} agent FLAGS... | worker [--slurm] FOLDER")


if __name__ == "__main__":
    main()
