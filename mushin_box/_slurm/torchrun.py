# SPDX-License-Identifier: MIT
"""A cell's ranks as torchrun workers, here: the ``torchrun`` setting of ``mushin_local``.

Why this shape
--------------
The local twin of the SLURM launcher already does everything a cell's job needs on the
host: it pickles the Hydra job (:class:`~mushin_box._slurm.launcher.CellJob`) once per cell,
starts it as a process group, records it in ``mushin_jobs.json`` (so ``status``, ``wait``
and ``cancel`` find it), waits for it and reads rank 0's result. Only the process it starts
differs. With ``torchrun=True`` submitit starts ONE task, and its "python" is this module's
agent (``python -m mushin_box._slurm.torchrun agent --nproc-per-node G --max-restarts K``,
to which submitit appends its usual ``-u -m submitit.core._submit FOLDER``). The agent
replaces itself by ``torchrun --standalone`` (``python -m torch.distributed.run``, so the
interpreter's own torch runs), whose G workers each run ``worker FOLDER``: every worker
unpickles and runs the same Hydra job, as SLURM tasks do, with submitit's task id set to
its torchrun ``RANK``. Rank 0's result pickle is the cell's ``JobReturn``; the other ranks'
land beside it, unread.

HydraDDP sees torchrun's environment and starts no rank (it checks the world size); the
cell runner sees ``RANK``/``WORLD_SIZE``, so only rank 0 writes the sidecars. When a worker
dies, torchrun stops the group and starts it again, up to ``--max-restarts`` times, with
``TORCHELASTIC_RESTART_COUNT`` raised by one: the restarted workers continue the cell from
its ``last.ckpt`` (the resume contract), and the record counts the restarts.

Examples
--------
>>> words = agent_command(2, 1, python="/venv/bin/python").split()
>>> words[1:5], words[-2:]
(['-m', 'mushin_box._slurm.torchrun', 'agent', '--nproc-per-node'], ['--max-restarts', '1'])
>>> torchrun_argv(["--nproc-per-node", "2", "--max-restarts", "1", "-u", "-m",
...                "submitit.core._submit", "/s/.submitit/%j"], python="py")[3:8]
['--standalone', '--nproc-per-node', '2', '--max-restarts', '1']
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["agent_command", "check_torchrun_settings", "torchrun_argv"]

MODULE = "mushin_box._slurm.torchrun"
_SUBMIT = ["-u", "-m", "submitit.core._submit"]  # what submitit appends to its "python"


def agent_command(nproc_per_node: int, max_restarts: int, *, python: str | None = None) -> str:
    """submitit's ``python`` command for a cell run by torchrun: this module's agent.

    ``python``: the interpreter (already a quoted command line; default this one)."""
    interpreter = python or shlex.quote(sys.executable)
    words = ["-m", MODULE, "agent", "--nproc-per-node", str(int(nproc_per_node))]
    words += ["--max-restarts", str(int(max_restarts))]
    return " ".join([interpreter, *words])


def check_torchrun_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``mushin_local``'s torchrun fields, checked: whole numbers, and one submitit task
    (torchrun starts the workers). Returns ``settings``."""
    for key, least in (("nproc_per_node", 1), ("max_restarts", 0)):
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{key} must be an int >= {least}, got {value!r}")
    if not isinstance(settings["torchrun"], bool):
        raise ValueError(f"torchrun must be true or false, got {settings['torchrun']!r}")
    if not settings["torchrun"]:
        if (settings["nproc_per_node"], settings["max_restarts"]) != (1, 0):
            raise ValueError(
                "nproc_per_node and max_restarts configure torchrun: set torchrun=true"
            )
    elif settings["tasks_per_node"] != 1:
        raise ValueError(
            "torchrun=true starts nproc_per_node workers itself: leave tasks_per_node at 1"
        )
    return settings


def torchrun_argv(argv: Sequence[str], *, python: str | None = None) -> list[str]:
    """The ``torchrun --standalone`` command line of the agent's arguments (``argv``: its
    own flags, then what submitit appended: ``-u -m submitit.core._submit FOLDER``)."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE} agent")
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--max-restarts", type=int, default=0)
    own, rest = parser.parse_known_args(list(argv))
    if len(rest) != len(_SUBMIT) + 1 or rest[:-1] != _SUBMIT:
        parser.error(f"expected {' '.join(_SUBMIT)} FOLDER after the flags, got {rest!r}")
    if own.nproc_per_node < 1 or own.max_restarts < 0:
        parser.error("--nproc-per-node must be >= 1 and --max-restarts >= 0")
    return [
        python or sys.executable,
        *("-m", "torch.distributed.run", "--standalone"),
        *("--nproc-per-node", str(own.nproc_per_node), "--max-restarts", str(own.max_restarts)),
        *("-m", MODULE, "worker", rest[-1]),
    ]


def _worker(folder: str) -> None:
    """Run the cell's pickled job as submitit's task ``RANK`` (torchrun set it); exit 1
    when the cell failed on this worker. Hydra hands a task's exception back inside the
    ``JobReturn``, so the worker would exit 0 and torchrun would wait for the others, which
    wait for it in a collective: a failure must reach torchrun, which stops the group (and
    restarts it while ``--max-restarts`` allows)."""
    from hydra.core.utils import JobStatus
    from submitit import JobEnvironment
    from submitit.core.submission import process_job
    from submitit.core.utils import pickle_load

    os.environ["SUBMITIT_LOCAL_GLOBALID"] = os.environ.get("RANK", "0")
    os.environ["SUBMITIT_LOCAL_LOCALID"] = os.environ.get("LOCAL_RANK", "0")
    process_job(folder)
    outcome = pickle_load(JobEnvironment().paths.result_pickle)
    if getattr(outcome[1], "status", None) == JobStatus.FAILED:
        sys.exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["agent"]:
        command = torchrun_argv(args[1:])
        # torch shares the rendezvous store with the workers' process group, and a restarted
        # group reads the last attempt's addresses from it (pytorch/pytorch#135712)
        os.environ.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
        sys.stdout.flush()
        os.execv(command[0], command)  # the submitit task IS torchrun: signals reach it
    elif args[:1] == ["worker"] and len(args) == 2:
        _worker(args[1])
    else:
        sys.exit(f"usage: python -m {MODULE} agent FLAGS... | worker FOLDER")


if __name__ == "__main__":
    main()
