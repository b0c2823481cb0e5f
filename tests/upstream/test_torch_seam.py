# SPDX-License-Identifier: MIT
"""torch's behaviour the kit relies on (``mushin_box._upstream.torch``). A failure names
what torch changed: fix the seam, not its callers."""

from __future__ import annotations

import time
from pathlib import Path

from mushin_box._upstream.torch import worker_failures


def test_every_failed_worker_is_heard_with_its_signal_local_rank_and_pid(
    tmp_path: Path,
) -> None:
    """Rank 1 is SIGKILLed, rank 0 exits with 1 after it, and both are dead by torch's next
    poll: torch logs rank 0's failure alone (both stamped within one second), but the seam
    hears both, the kill by its signal (what ``_slurm.torchrun``'s agent keeps)."""
    from torch.distributed.elastic.multiprocessing import start_processes
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs

    heard: list[tuple[int, int, int]] = []
    with worker_failures(lambda *failure: heard.append(failure)):
        context = start_processes(
            name="seam",
            entrypoint="/bin/sh",
            args={0: ("-c", "sleep 0.5; exit 1"), 1: ("-c", "kill -9 $$")},
            envs={0: {}, 1: {}},
            logs_specs=DefaultLogsSpecs(log_dir=str(tmp_path)),
        )
        time.sleep(2)  # both gone before the first poll
        deadline = time.monotonic() + 30
        result = None
        while result is None and time.monotonic() < deadline:
            result = context.wait(timeout=1)
        context.close()
    assert result is not None and result.is_failed()
    pids = {rank: failure.pid for rank, failure in result.failures.items()}
    assert set(heard) == {(1, 0, pids[0]), (-9, 1, pids[1])}
    heard.clear()
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file="")
    assert heard == []  # closed: torch's own class again
