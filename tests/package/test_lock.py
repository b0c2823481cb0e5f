"""``scripts/lock --check`` of committed locks does not depend on what the index gained since.

An index can gain a file dated before the lock's cutoff (a mirror's backfill, a late
upload), so ``--exclude-newer`` alone does not hold a lock still. ``scripts/lock`` resolves
each lock over its committed self, and uv keeps every pin the ranges still allow. The
fake uv below behaves as uv does with an existing output file (it keeps it; checked
against the real uv and PyPI with a later cutoff) and as a resolver that found a newer
release without one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FAKE_UV = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "uv 0.13.9"; exit 0; fi
cat > /dev/null
while [ $# -gt 0 ]; do
    if [ "$1" = "--output-file" ]; then
        shift
        [ -s "$1" ] || printf 'newer==2 \\\\\\n    --hash=sha256:00\\n' > "$1"
    fi
    shift
done
"""

LOCK = "pinned==1 \\\n    --hash=sha256:11\n"


def test_check_keeps_each_committed_pin_when_the_index_offers_newer(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "ci").mkdir()
    for name in ("lock", "lock-common.sh"):
        shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
    for name in ("pyproject.toml", "ci/constraints.txt"):
        shutil.copy2(REPO / name, root / name)
    for name in ("dev.lock", "run.lock", "floor.lock"):
        (root / "ci" / name).write_text(LOCK)
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "MUSHIN_UV": str(uv),
        "MUSHIN_TORCH_WHEEL": str(wheel),
    }

    def lock(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(root / "scripts" / "lock"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    check = lock("--check")
    assert check.returncode == 0, check.stderr
    assert check.stderr.count("is up to date") == 3
    (root / "ci" / "floor.lock").unlink()  # a lock not committed yet is resolved afresh
    check = lock("--check")
    assert check.returncode == 1 and "floor.lock is out of date: run scripts/lock" in check.stderr
    assert lock().returncode == 0
    assert (root / "ci" / "dev.lock").read_text() == LOCK
    assert (root / "ci" / "floor.lock").read_text().startswith("newer==2")
