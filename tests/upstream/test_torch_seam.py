# SPDX-License-Identifier: MIT
"""torch's behaviour the kit relies on (``mushin_box._upstream.torch``). A failure names
what torch changed: fix the seam, not its callers."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from mushin_box._upstream.torch import FAILED_WORKER_LOGGER, failed_worker


def test_torchrun_logs_a_killed_workers_signal_pid_and_local_rank_as_record_args(
    tmp_path: Path,
) -> None:
    """torch.distributed.elastic.multiprocessing.api logs the first failed worker of a
    group with its exit code (minus the signal), local rank and pid as the record's
    arguments: what a torchrun agent's handler keeps (``_slurm.torchrun._ExitNotes``)."""
    from torch.distributed.elastic.multiprocessing import start_processes
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs

    seen: list[tuple[int, int, int]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found = failed_worker(record)
            if found is not None:
                seen.append(found)

    logger = logging.getLogger(FAILED_WORKER_LOGGER)
    handler = Keep()
    logger.addHandler(handler)
    try:
        context = start_processes(
            name="seam",
            entrypoint="/bin/sh",
            args={0: ("-c", "sleep 30"), 1: ("-c", "kill -9 $$")},  # rank 1: SIGKILLed
            envs={0: {}, 1: {}},
            logs_specs=DefaultLogsSpecs(log_dir=str(tmp_path)),
        )
        deadline = time.monotonic() + 30
        result = None
        while result is None and time.monotonic() < deadline:
            result = context.wait(timeout=1)
        context.close()
    finally:
        logger.removeHandler(handler)
    assert result is not None and result.is_failed()
    pid = result.failures[1].pid
    assert seen == [(-9, 1, pid)]
