# SPDX-License-Identifier: MIT
"""pytest plugin: the ``slurm_cluster`` fixture, a real SLURM cluster on this machine.

Loaded from ``tests/conftest.py`` with ``pytest_plugins = ["_slurm_cluster"]``.

The first test that asks for it runs ``scripts/local-slurm start`` (bounded by
``MUSHIN_SLURM_START_TIMEOUT`` seconds, default 300; that includes a first ``apt-get install``);
once one start succeeded, the fixture, for the rest of the session,

* sets ``SLURM_CONF`` in ``os.environ``, so sbatch/srun/submitit find the cluster and jobs
  inherit it;
* prepends ``tests/``, its room folders (``tests/<room>/``, those holding test modules) and the
  repository root to ``PYTHONPATH``, so jobs can import the helper modules beside this one,
  unpickle callables defined in test modules (submitit pickles them by reference, e.g. as
  ``test_launcher.square_task``) and import ``mushin_box``.

A failed start is tried again at once, and a later test that asks for the cluster tries again
(a start can fail for a passing reason: another apt holding the dpkg lock past the script's wait),
until ``MAX_FAILED_STARTS`` starts have failed; from then on a test is told the last reason at once,
so a broken cluster costs a few start timeouts, not one per test. A test that gets no cluster is
skipped with the reason, unless ``MUSHIN_REQUIRE_SLURM=1`` (as in CI): then it fails. A cluster
that this fixture started is stopped at the end of the session, unless ``MUSHIN_SLURM_KEEP=1``; one
that was already running is left running. Other ``MUSHIN_SLURM_*`` variables (state directory,
nodes, ...) reach the script unchanged; see its header.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = ["ClusterStarts", "ClusterUnavailable", "SlurmCluster", "slurm_cluster"]

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
# test modules live in tests/<room>/ without __init__.py: each is imported by its file's name
ROOM_DIRS = tuple(sorted({p.parent for p in TESTS_DIR.glob("*/test_*.py")}))
SCRIPT = REPO_ROOT / "scripts" / "local-slurm"
MAX_FAILED_STARTS = 4  # two tests' worth: each asks for a start and one more at once


@dataclass(frozen=True)
class SlurmCluster:
    """What the ``slurm_cluster`` fixture yields."""

    conf: Path  #: slurm.conf; also ``os.environ["SLURM_CONF"]`` during the session
    nodes: tuple[str, ...]  #: node names, sorted, e.g. ``("slurmnode1", "slurmnode2")``
    partition: str  #: the default partition, e.g. ``"debug"``
    cpus_per_node: int  #: CPU slots per node
    gpus_per_node: int  #: fake GPUs (count GRES ``gpu``) per node
    state_dir: Path  #: the script's state directory (logs under ``log/``)


def _run_script(command: str, timeout_s: float) -> tuple[int | None, str]:
    """Run ``scripts/local-slurm COMMAND``; return (exit code or None on timeout, output).

    Output goes to a temporary file, not a pipe, so nothing can block on a pipe kept open by a
    daemon; the script gets its own process group, killed as a whole on timeout.
    """
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(
            ["bash", str(SCRIPT), command],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code: int | None = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        output.seek(0)
        return code, output.read()


def _query(conf: Path, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(conf)}
    return subprocess.run(
        list(args), env=env, capture_output=True, text=True, timeout=15, check=True
    ).stdout


def _describe(conf: Path, state_dir: Path) -> SlurmCluster:
    """Read node names, partition, CPUs and GPUs from the running cluster."""
    nodes: set[str] = set()
    partitions: set[str] = set()
    cpus: set[int] = set()
    gpus: set[int] = set()
    for line in _query(conf, "sinfo", "-h", "-N", "-o", "%N|%P|%c|%G").splitlines():
        node, partition, cpu_count, gres = line.split("|")
        nodes.add(node)
        partitions.add(partition)
        cpus.add(int(cpu_count))
        for item in gres.split(","):  # e.g. "gpu:4" or "gpu:4(S:0)"
            name, _, count = item.partition(":")
            if name == "gpu":
                gpus.add(int(count.split("(")[0]))
    default = sorted(p.rstrip("*") for p in partitions if p.endswith("*")) or sorted(partitions)
    if not nodes or not default or len(cpus) != 1 or len(gpus) != 1:
        raise RuntimeError(
            f"unexpected cluster layout: nodes={nodes} partitions={partitions} "
            f"cpus={cpus} gpus={gpus}"
        )
    return SlurmCluster(
        conf=conf,
        nodes=tuple(sorted(nodes)),
        partition=default[0],
        cpus_per_node=cpus.pop(),
        gpus_per_node=gpus.pop(),
        state_dir=state_dir,
    )


class ClusterUnavailable(Exception):
    """Why the cluster could not be started (the requesting test is skipped or fails with it)."""


@dataclass
class ClusterStarts:
    """The session's starts of the cluster: the first that succeeds is kept for the session; a
    failed one is tried again at once, and again when the next test asks, until ``max_failed``
    have failed: then the last reason, at once."""

    start: Callable[[], SlurmCluster]  #: raises ClusterUnavailable
    max_failed: int = MAX_FAILED_STARTS
    started: SlurmCluster | None = None
    failed: list[str] = field(default_factory=list)

    def get(self) -> SlurmCluster:
        if self.started is not None:
            return self.started
        tries = min(2, self.max_failed - len(self.failed))
        if tries <= 0:
            raise ClusterUnavailable(
                f"not started again: {len(self.failed)} starts failed this session, "
                f"the last: {self.failed[-1]}"
            )
        for _ in range(tries):
            try:
                self.started = self.start()
                return self.started
            except ClusterUnavailable as error:
                self.failed.append(str(error))
        raise ClusterUnavailable(self.failed[-1])


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail when MUSHIN_REQUIRE_SLURM=1."""
    if os.environ.get("MUSHIN_REQUIRE_SLURM") == "1":
        pytest.fail(
            f"local SLURM cluster required (MUSHIN_REQUIRE_SLURM=1): {reason}", pytrace=False
        )
    pytest.skip(f"no local SLURM cluster (set MUSHIN_REQUIRE_SLURM=1 to fail instead): {reason}")


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _start(was_running: bool, patch: pytest.MonkeyPatch) -> SlurmCluster:
    """``scripts/local-slurm start``, and the cluster it started, with ``SLURM_CONF`` and
    ``PYTHONPATH`` set for its jobs through ``patch``; raises ClusterUnavailable."""
    timeout_s = float(os.environ.get("MUSHIN_SLURM_START_TIMEOUT", "300"))
    if not SCRIPT.is_file():
        raise ClusterUnavailable(f"{SCRIPT} is missing")
    code, output = _run_script("env", 30)  # prints: export SLURM_CONF=<path>
    if code != 0 or not output.startswith("export SLURM_CONF="):
        raise ClusterUnavailable(f"`scripts/local-slurm env` exited {code}:\n{_tail(output)}")
    conf = Path(shlex.split(output.strip().removeprefix("export SLURM_CONF="))[0])
    code, output = _run_script("start", timeout_s)
    if code != 0 and not was_running:
        _run_script("stop", 120)  # do not leave half-started daemons behind
    if code is None:
        raise ClusterUnavailable(
            f"`scripts/local-slurm start` did not finish within {timeout_s:.0f}s "
            f"(MUSHIN_SLURM_START_TIMEOUT):\n{_tail(output)}"
        )
    if code != 0:
        raise ClusterUnavailable(f"`scripts/local-slurm start` exited {code}:\n{_tail(output)}")
    try:
        cluster = _describe(conf, conf.parent.parent)
    except (OSError, subprocess.SubprocessError, RuntimeError, ValueError) as error:
        raise ClusterUnavailable(f"the cluster started but cannot be queried: {error}") from None
    pythonpath = [
        str(TESTS_DIR),
        *map(str, ROOM_DIRS),
        str(REPO_ROOT),
        os.environ.get("PYTHONPATH", ""),
    ]
    patch.setenv("SLURM_CONF", str(conf))
    patch.setenv("PYTHONPATH", os.pathsep.join(p for p in pythonpath if p))
    return cluster


@pytest.fixture(scope="session")
def _slurm_starts() -> Iterator[ClusterStarts]:
    """The session's starts. It never fails itself: pytest would replay a session fixture's
    failure to every later test."""
    was_running = SCRIPT.is_file() and _run_script("status", 30)[0] == 0
    with pytest.MonkeyPatch.context() as patch:
        starts = ClusterStarts(lambda: _start(was_running, patch))
        yield starts
    keep = os.environ.get("MUSHIN_SLURM_KEEP") == "1" or "PYTEST_XDIST_WORKER" in os.environ
    if starts.started is not None and not was_running and not keep:
        code, output = _run_script("stop", 120)
        if code != 0:
            print(f"warning: `scripts/local-slurm stop` exited {code}:\n{_tail(output)}")


@pytest.fixture
def slurm_cluster(_slurm_starts: ClusterStarts) -> SlurmCluster:
    """A running local SLURM cluster (``scripts/local-slurm``), started once for the session."""
    try:
        return _slurm_starts.get()
    except ClusterUnavailable as error:
        _unavailable(str(error))


@pytest.fixture
def slurm_client(slurm_cluster: SlurmCluster) -> None:
    """SLURM's client commands (sbatch, scontrol, ...) on PATH: installed with the local
    cluster, so that a test of them runs wherever the cluster does (CI) instead of being
    skipped when it happens to run before the first test that starts the cluster. The test
    points ``SLURM_CONF`` where it needs it."""
