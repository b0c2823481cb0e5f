# SPDX-License-Identifier: MIT
"""scripts/local-slurm waits, bounded, for another apt or dpkg instead of failing at once.

Its functions are sourced and run against a file a child process locks as dpkg locks its own
(a POSIX lock), with a stand-in ``apt-get`` that reports whether it found the lock free. No
cluster, root or apt is needed; the real dpkg lock is exercised by ``scripts/local-slurm start``
on a machine without the packages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "local-slurm"

pytestmark = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks")

_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""

# records its arguments and whether the lock was free when it ran
_APT_GET = """#!{python}
import fcntl, os, sys
fd = os.open(os.environ["LOCK"], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    state = "free"
except OSError:
    state = "held"
with open(os.environ["CALLS"], "a") as calls:
    calls.write(state + " " + " ".join(sys.argv[1:]) + "\\n")
"""


@contextmanager
def held(lock: Path) -> Iterator[int]:
    """``lock`` locked by another process until the block ends; yields its pid."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(lock), "600"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def apt_get(tmp_path: Path, lock: Path, wait_s: int) -> subprocess.Popen[str]:
    """The script's ``apt_get update -qq``, started, with ``lock`` as its only lock and
    ``wait_s`` to go; it prints ``exit N`` when it fails."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "apt-get"
    fake.write_text(_APT_GET.format(python=sys.executable))
    fake.chmod(0o755)
    body = (
        'source "$1"; APT_LOCKS=("$LOCK"); LOG=$2; '
        f'apt_get $(($(date +%s) + {wait_s})) update -qq || echo "exit $?"'
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "LOCK": str(lock),
        "CALLS": str(tmp_path / "calls"),
    }
    return subprocess.Popen(
        ["bash", "-c", body, "bash", str(SCRIPT), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_apt_get_waits_for_a_held_lock_says_so_and_runs_once_it_is_free(tmp_path: Path) -> None:
    lock = tmp_path / "lock-frontend"
    lock.touch()
    with held(lock) as pid:
        run = apt_get(tmp_path, lock, wait_s=30)
        assert run.stderr is not None
        said = run.stderr.readline()  # the lock is released once it says it waits
    out, err = run.communicate(timeout=60)
    assert "exit" not in out, err
    # the seconds left, counted when it starts to wait: 30, or 29 past a second's turn
    assert re.search(
        rf"waiting up to (30|29)s for {re.escape(str(lock))}, held by pid {pid} ", said
    )
    [call] = (tmp_path / "calls").read_text().splitlines()
    state, *args = call.split()
    assert state == "free"  # it waited: a second apt-get fails at once on a held lock
    # dpkg's own wait, bounded by what is left of the deadline, closes the race after the check
    option, _, seconds = args[1].partition("=")
    assert args[0] == "-o" and option == "DPkg::Lock::Timeout" and 0 < int(seconds) <= 30
    assert args[2:] == ["update", "-qq"]


def test_a_lock_held_past_the_deadline_fails_with_the_holder_and_the_setting(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "lock-frontend"
    lock.touch()
    with held(lock) as pid:
        out, err = apt_get(tmp_path, lock, wait_s=1).communicate(timeout=60)
    assert out.strip() == "exit 124"
    assert not (tmp_path / "calls").exists()  # apt-get never ran
    assert f"{lock} is still held by pid {pid}" in err
    assert "MUSHIN_SLURM_APT_WAIT" in err
