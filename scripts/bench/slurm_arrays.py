#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""A sweep bigger than the cluster's MaxArraySize, end to end on the local SLURM cluster.

``mushin-box launch --detach --max-parallel P`` of a trivial task over ``--cells N`` cells
(the local cluster's MaxArraySize is SLURM's default, 1001, so 2,500 cells go as 3 arrays),
then ``mushin-box wait`` until every cell has run, and ``status`` while they run; then a
second sweep of N cells queued on hold, which ``mushin-box cancel`` stops. squeue, sacct and
scancel are wrapped by scripts that log each call, so the calls per command are counted.
Prints one JSON object: the wall times, the calls, the arrays, and the most cells that ran
at one time (from sacct's start and end times, to the second).

    .venv/bin/python scripts/bench/slurm_arrays.py --cells 2500 --max-parallel 4

Needs the local cluster (``scripts/local-slurm start``; ``SLURM_CONF`` from
``scripts/local-slurm env``); prints ``{"skipped": why}`` without one. About 0.6 s a cell
on a 2-core machine: the full size takes ~40 minutes, so CI never runs it. Its jobs run
at a low priority (``nice=10000``): on a shared cluster the others' jobs go first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BOX = [sys.executable, "-m", "mushin_box"]

EXPERIMENT = """
from mushin_box import Workflow


def task(x: int = 0) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def _wrappers(folder: Path) -> dict[str, str]:
    """An environment whose squeue, sacct and scancel log each call, then run the real one."""
    folder.mkdir()
    for name in ("squeue", "sacct", "scancel"):
        real = shutil.which(name)
        if real is None:
            raise SystemExit(json.dumps({"skipped": f"no {name} on PATH"}))
        script = folder / name
        script.write_text(
            f'#!/bin/sh\nargs="$*"\nprintf "%s %s\\n" {name} "${{#args}}" >> "{folder}/calls"\n'
            f'exec {real} "$@"\n'
        )
        script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def _calls(folder: Path) -> dict[str, object]:
    """The logged calls since the last look: how many of each tool, and the longest
    command line (characters of its arguments); the log is emptied."""
    path = folder / "calls"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    counts = {name: sum(1 for line in lines if line.split()[0] == name) for name in
              ("squeue", "sacct", "scancel")}  # fmt: skip
    longest = max((int(line.split()[1]) for line in lines), default=0)
    return {**counts, "longest_argv_chars": longest}


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=7200)
    return time.perf_counter() - t0, done.returncode, done.stdout + done.stderr


def _most_at_once(arrays: list[str]) -> tuple[int, int]:
    """(the most cells running at one time, the cells that ran) from sacct's times."""
    out = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", ",".join(arrays), "-o", "JobID,Start,End"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    events: list[tuple[float, int]] = []
    for line in out.splitlines():
        job, start, end = line.split("|")
        if "[" in job or start in ("Unknown", "None") or end in ("Unknown", "None"):
            continue
        events += [(datetime.fromisoformat(start).timestamp(), 1)]
        events += [(datetime.fromisoformat(end).timestamp(), -1)]
    running = most = 0
    for _, step in sorted(events):  # an end before a start of the same second
        running += step
        most = max(most, running)
    return most, len(events) // 2


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cells", type=int, default=2500)
    parser.add_argument("--max-parallel", type=int, default=4)
    parser.add_argument("--keep", action="store_true", help="keep the sweep directories")
    args = parser.parse_args()
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode != 0 or " UP" not in ping.stdout:
        print(json.dumps({"skipped": "no SLURM cluster answers (scripts/local-slurm start)"}))
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-arrays-", dir=os.environ.get("BENCH_DIR")))
    env = _wrappers(work / "bin")
    (work / "exp.py").write_text(EXPERIMENT)
    cells, parallel = args.cells, args.max_parallel
    sweep = work / "sweep"
    launch = [*BOX, "launch", "exp.py", "--slurm", "--detach", "--no-progress", "--time", "10"]
    launch += ["--max-parallel", str(parallel), f"x=range(0,{cells})"]
    launch += ["--sbatch", "nice=10000"]  # others' jobs on a shared cluster go first
    result: dict[str, object] = {"cells": cells, "max_parallel": parallel}

    t0 = time.perf_counter()
    took, code, said = _run([*launch, "--working-dir", str(sweep)], env, work)
    if code != 0:
        raise SystemExit(f"launch exited {code}: {said[-2000:]}")
    result["submit_s"] = took
    jobs = json.loads((sweep / "mushin_jobs.json").read_text())["jobs"]
    arrays = list(dict.fromkeys(str(j["job_id"]).split("_")[0] for j in jobs))
    result.update(jobs=len(jobs), arrays=len(arrays), submit_calls=_calls(work / "bin"))

    status_s, status_calls = [], []
    for _ in range(3):  # status while the cells run
        took, code, said = _run([*BOX, "status", str(sweep), "--json"], env, work)
        if code not in (0, 3):
            raise SystemExit(f"status exited {code}: {said[-2000:]}")
        status_s.append(took)
        status_calls.append(_calls(work / "bin"))
        time.sleep(10)
    result.update(status_s=status_s, status_calls=status_calls)

    while True:  # `wait` in slices of two minutes
        took, code, said = _run(
            [*BOX, "wait", str(sweep), "--interval", "10", "--timeout", "120", "--no-progress"],
            env,
            work,
        )
        if code != 3:
            break
    result["wall_s"] = time.perf_counter() - t0
    result["per_cell_s"] = result["wall_s"] / cells  # type: ignore[operator]
    result["wait_exit"] = code
    calls = _calls(work / "bin")
    result["wait_calls"] = calls
    result["wait_polls"] = calls["squeue"]  # each look at the sweep asks squeue once
    most, ran = _most_at_once(arrays)
    result.update(most_at_once=most, cells_ran=ran)
    took, code, said = _run([*BOX, "status", str(sweep), "--json"], env, work)
    counts = json.loads(said[said.index("{") :])["counts"] if "{" in said else {}
    result["final_counts"] = counts

    held = work / "held"  # the same sweep queued on hold, then cancelled
    _run([*launch, "--working-dir", str(held), "--sbatch", "hold"], env, work)
    _calls(work / "bin")
    took, code, said = _run([*BOX, "cancel", str(held)], env, work)
    result.update(cancel_s=took, cancel_exit=code, cancel_calls=_calls(work / "bin"))
    took, code, said = _run([*BOX, "status", str(held), "--json"], env, work)
    result["cancelled_counts"] = (
        json.loads(said[said.index("{") :])["counts"] if "{" in said else {}
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
