# SPDX-License-Identifier: MIT
"""torch's private behaviour, behind one function: the only module that names a torchrun
logger or reads one of its records.

* :func:`failed_worker` (the record ``torch.distributed.elastic.multiprocessing.api``
  logs for a round's first failed worker: ``failed (exitcode: %s) local_rank: %s (pid: %s)
  of binary: %s``): the torchrun agent restarts its workers itself, and a worker killed by
  a signal writes nothing, so this record, seen by a log handler in the agent's process, is
  the one place the signal is told before the restart. torch's public API reports a
  worker's failure only when the agent gives up (``ChildFailedError``) or to an event
  handler that gets the final result alone.

Its test of the behaviour relied on: ``tests/upstream/test_torch_seam.py``.
"""

from __future__ import annotations

import logging

__all__ = ["FAILED_WORKER_LOGGER", "failed_worker"]

#: the logger whose records :func:`failed_worker` reads, in torchrun's (the agent's) process
FAILED_WORKER_LOGGER = "torch.distributed.elastic.multiprocessing.api"
_FAILED = "failed (exitcode: "


def failed_worker(record: logging.LogRecord) -> tuple[int, int, int] | None:
    """``(exitcode, local_rank, pid)`` of torchrun's record of a round's first failed worker
    (its arguments, not its text; a negative exit code is the signal's number); None for
    any other record.

    Examples
    --------
    >>> record = logging.LogRecord(FAILED_WORKER_LOGGER, logging.ERROR, "api.py", 1,
    ...     "failed (exitcode: %s) local_rank: %s (pid: %s) of binary: %s",
    ...     (-9, 1, 4242, "/usr/bin/python3"), None)
    >>> failed_worker(record)
    (-9, 1, 4242)
    """
    args = record.args
    if not str(record.msg).startswith(_FAILED) or not isinstance(args, tuple) or len(args) < 3:
        return None
    try:
        exitcode, local_rank, pid = (int(a) for a in args[:3])  # pyright: ignore[reportArgumentType]
    except (TypeError, ValueError):
        return None
    return exitcode, local_rank, pid
