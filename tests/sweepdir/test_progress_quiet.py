# SPDX-License-Identifier: MIT
"""While the progress bar is drawn, Lightning's per-cell notices are left out and the
rest of a rank's logging is kept; both are as before once the bar stops."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from mushin_box._sweepdir.progress import CellProgress


def test_the_bar_leaves_out_lightning_s_notices_only_while_drawn(tmp_path: Path) -> None:
    seen = io.StringIO()
    handler = logging.StreamHandler(seen)
    logger = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    fabric = logging.getLogger("lightning_fabric.utilities.distributed")
    for log in (logger, fabric):
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        bar = CellProgress(tmp_path, total=2, run_id="r", period_s=60).start()
        try:
            logger.info("GPU available: False, used: False")
            fabric.info("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2")
            fabric.info("-" * 20 + "\ndistributed_backend=gloo\nAll distributed processes")
            logger.info("epoch 1: my own line")
        finally:
            bar.stop()
        assert seen.getvalue().splitlines() == ["epoch 1: my own line"]
        logger.info("GPU available: False, used: False")
        assert seen.getvalue().splitlines()[-1] == "GPU available: False, used: False"
    finally:
        for log in (logger, fabric):
            log.removeHandler(handler)


def test_a_handler_on_this_process_s_stderr_is_restored_after_the_bar(tmp_path: Path) -> None:
    import sys

    real = logging.StreamHandler(sys.__stderr__)  # made before the bar, on the real stderr
    here = logging.StreamHandler(sys.stderr)  # on what sys.stderr is now (pytest's capture)
    logger = logging.getLogger("mushin_box.test_progress_quiet")
    for handler in (real, here):
        logger.addHandler(handler)
    try:
        CellProgress(tmp_path, total=1, run_id="r", period_s=60).start().stop()
        assert real.stream is sys.__stderr__ and here.stream is sys.stderr
    finally:
        for handler in (real, here):
            logger.removeHandler(handler)
