# SPDX-License-Identifier: MIT
"""The ``slurm_cluster`` fixture retries a failed start and does not keep its failure.

A pytest session of its own runs a few tests that ask for the fixture, against a stand-in
``scripts/local-slurm`` whose ``start`` fails a given number of times: no cluster is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import _slurm_cluster

# fails `start` while fewer than $FAILS starts were made (counted in $STARTS)
_SCRIPT = """
case $1 in
  env) echo "export SLURM_CONF=$STATE/etc/slurm.conf" ;;
  status) exit 1 ;;
  start)
    echo x >>"$STARTS"
    (($(wc -l <"$STARTS") > FAILS)) || { echo "start failed"; exit 1; }
    ;;
esac
"""

_CONFTEST = f"""
import sys
from pathlib import Path

sys.path.insert(0, {str(Path(_slurm_cluster.__file__).parent)!r})
pytest_plugins = ["_slurm_cluster"]


def pytest_sessionstart(session):
    import _slurm_cluster

    _slurm_cluster.SCRIPT = Path(__file__).parent / "local-slurm"
    _slurm_cluster._describe = lambda conf, state_dir: _slurm_cluster.SlurmCluster(
        conf, ("slurmnode1",), "debug", 4, 4, state_dir
    )
"""


def run_session(tmp_path: Path, tests: int, fails: int) -> tuple[dict[str, str], int, str]:
    """``tests`` tests asking for the cluster, whose start fails ``fails`` times: each test's
    outcome, how many starts were made, and the session's output."""
    (tmp_path / "local-slurm").write_text(_SCRIPT)
    (tmp_path / "conftest.py").write_text(_CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_uses_cluster.py").write_text(
        "".join(f"def test_{i}(slurm_cluster):\n    pass\n\n" for i in range(tests))
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUSHIN_")}
    env.update(STATE=str(tmp_path), STARTS=str(tmp_path / "starts"), FAILS=str(fails))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", "--junitxml=r.xml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes = {  # a test case's first child says how it did: skipped, error, failure
        case.get("name", ""): ([child.tag for child in case] or ["passed"])[0]
        for case in ElementTree.parse(tmp_path / "r.xml").iter("testcase")
    }
    starts = (tmp_path / "starts").read_text().count("x") if (tmp_path / "starts").exists() else 0
    return outcomes, starts, done.stdout


def test_a_failed_start_is_tried_again_at_once(tmp_path: Path) -> None:
    outcomes, starts, out = run_session(tmp_path, tests=2, fails=1)
    assert outcomes == {"test_0": "passed", "test_1": "passed"}, out
    assert starts == 2  # the cluster, once up, is kept for the session


def test_a_later_test_tries_again_after_a_start_failed_twice(tmp_path: Path) -> None:
    outcomes, starts, out = run_session(tmp_path, tests=3, fails=2)
    assert outcomes == {"test_0": "skipped", "test_1": "passed", "test_2": "passed"}, out
    assert starts == 3
    assert "start failed" in out  # the skip gives the script's reason


def test_a_cluster_that_never_starts_fails_fast_after_a_bounded_number_of_starts(
    tmp_path: Path,
) -> None:
    outcomes, starts, out = run_session(tmp_path, tests=5, fails=99)
    assert list(outcomes.values()) == ["skipped"] * 5, out
    assert starts == _slurm_cluster.MAX_FAILED_STARTS == 4
    assert "not started again: 4 starts failed this session" in out
