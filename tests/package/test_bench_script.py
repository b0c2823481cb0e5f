# SPDX-License-Identifier: MIT
"""``scripts/bench/run`` moves into the project's venv when there is one, once, and runs
with the Python it was given when there is none (it used to re-execute itself forever)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_bench_script_runs_with_its_own_python_where_no_venv_exists(tmp_path: Path) -> None:
    bench = tmp_path / "scripts" / "bench"
    shutil.copytree(REPO / "scripts" / "bench", bench)  # a checkout with no .venv
    proc = subprocess.run(
        [sys.executable, str(bench / "run"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--quick" in proc.stdout
