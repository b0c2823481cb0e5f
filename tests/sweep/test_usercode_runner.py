# SPDX-License-Identifier: MIT
"""The code fingerprint follows the script's bytes, not how it was started (issue 42, case
11): the same, unchanged script run under a runner (``python -m cProfile gen.py``) named
the runner's module as ``__main__``, its fingerprint changed ("code: gen"), and a resume
of a finished 10,000-cell sweep ran every cell again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GEN = """
import helper
from mushin_box._sweep.usercode import code_identity


def task(x: int = 1) -> dict:
    return {"y": helper.SCALE * x}


if __name__ == "__main__":
    identity = code_identity(task)
    print(identity.fingerprint, sorted(identity.modules))
"""


@pytest.mark.parametrize(
    "runner",
    [["-m", "cProfile", "-o", "/dev/null"], ["-m", "trace", "--count", "-C", "."]],
    ids=["cProfile", "trace"],
)
def test_a_script_under_a_runner_has_its_own_fingerprint(tmp_path: Path, runner: list[str]) -> None:
    (tmp_path / "gen.py").write_text(GEN)
    (tmp_path / "helper.py").write_text("SCALE = 2.0\n")

    def printed(*argv: str) -> str:
        proc = subprocess.run(
            [sys.executable, *argv, "gen.py"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.strip().splitlines()[-1]

    plain = printed()
    assert plain.endswith("['gen', 'helper']"), plain
    assert printed(*runner) == plain
