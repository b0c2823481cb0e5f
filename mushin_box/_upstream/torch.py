# SPDX-License-Identifier: MIT
"""torch's private behaviour: how torch elastic records a failed worker (:func:`worker_failures`).

A worker killed by a signal writes nothing, and the agent restarts it: its record is the one
place the signal is told. torch's public API reports a failure only when the agent gives up;
every failure is a public ``ProcessFailure``, and the seam hears each one as it is made.

Test: ``tests/upstream/test_torch_seam.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def worker_failures(report: Callable[[int, int, int], None]) -> Iterator[None]:
    """While open, ``report(exitcode, local_rank, pid)`` for every failed worker torch
    elastic records in this process (a negative exit code is the signal's number), as it
    records it: the agent's process, where torchrun runs. ``report`` must not raise."""
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    made = ProcessFailure.__post_init__

    def post_init(failure: ProcessFailure) -> None:
        made(failure)
        report(int(failure.exitcode), int(failure.local_rank), int(failure.pid))

    ProcessFailure.__post_init__ = post_init  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    finally:
        ProcessFailure.__post_init__ = made  # pyright: ignore[reportAttributeAccessIssue]
