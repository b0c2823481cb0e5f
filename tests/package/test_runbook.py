# SPDX-License-Identifier: MIT
"""scripts/runbook: the seed's runbook steps 1-5 against the local SLURM cluster; step 4
both through Workflow.run and as the seed writes it (--multirun, hydra/launcher=submitit_slurm),
and step 5 loads both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.mark.timeout(600)  # the runbook's own bound (below); ~3 min on an idle 2-core machine
def test_runbook_passes_every_check(tmp_path: Path, slurm_cluster: Any) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "runbook.py"),
            "--workdir",
            str(tmp_path),
            "--partition",
            slurm_cluster.partition,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert len(lines) == 9 and all(line.startswith("PASS") for line in lines), lines
    assert any("--multirun hydra/launcher=submitit_slurm" in line for line in lines), lines
    assert "runbook: 9 passed, 0 failed" in proc.stdout
