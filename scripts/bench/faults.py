#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""The fault battery's kill -9 trials and disk-full levels, reproducibly (docs/reliability.md).

kill -9 trials: a 4-cell local sweep (each cell sleeps, then leaves one marker file per
execution) is started as its own process and killed with SIGKILL at a random moment of its
span (after its first cell started: 0-8 s in process, 0-2.5 s for submitit_local, whose
cells of 2 s run side by side), then resumed until it completes (a resume
refused because cells of the killed driver still run is retried once they end). Counted
per trial, over the sidecars and markers:

* lost: a cell not ``completed`` with the right metrics after the resume;
* computed twice: a cell whose task finished more than once (two markers);
* left corrupt: a JSON sidecar that does not parse, or an empty ``.hydra/*.yaml``, after the
  kill and after the resume.

Disk-full levels (root only: each mounts a 1 MiB tmpfs): a 3-cell sweep with
``on_error="nan"`` on a disk with N free pages; what was raised, what each cell records,
then the same after making room and resuming.

    sudo .venv/bin/python scripts/bench/faults.py                   # 10 trials per launcher
    .venv/bin/python scripts/bench/faults.py --trials 20 --seed 3 --launchers basic
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TASK = """
import os, time, uuid
from pathlib import Path
def marker_task(x: int, markers: str, sleep_s: float = 2.0) -> dict:
    time.sleep(sleep_s)
    Path(markers, f"x={x}.{uuid.uuid4().hex}.done").write_text(str(os.getpid()))
    return {"x2": 2 * x}
"""
DRIVER = """
import sys
from mushin_box import Workflow, multirun
from battery_task import marker_task
launcher = None if sys.argv[3] == "basic" else sys.argv[3]
Workflow(marker_task).run(working_dir=sys.argv[1], resume=True, progress=False,
    launcher=launcher, launcher_config={"timeout_min": 5} if launcher else None,
    x=multirun([1, 2, 3, 4]), markers=sys.argv[2])
"""
DISK = """
import os, sys
from mushin_box import ResumeContext, Workflow, multirun
def grid_task(x: int, mushin_resume: ResumeContext) -> dict:
    if x == 2 and os.environ.get("BATTERY_FILL"):  # the task itself fills the disk
        (mushin_resume.dir / "big.bin").write_bytes(b"w" * (4 << 20))
    return {"x2": 2.0 * x}
try:
    Workflow(grid_task).run(working_dir=sys.argv[1], on_error="nan", resume=True,
                            progress=False, x=multirun([1, 2, 3]))
    print("raised: nothing")
except BaseException as exc:
    print(f"raised: {type(exc).__name__}: {exc}")
"""


def said(stdout: str) -> str:
    """What the disk sweep says it raised (Hydra prints its own lines around it)."""
    lines = [line for line in stdout.splitlines() if line.startswith("raised: ")]
    return lines[-1].removeprefix("raised: ")[:60] if lines else "?"


def corrupt(root: Path) -> list[str]:
    bad = [str(p) for p in root.glob("**/.hydra/*.yaml") if p.stat().st_size == 0]
    for path in root.glob("**/*.json"):
        try:
            json.loads(path.read_bytes())
        except ValueError:
            bad.append(str(path))
    return bad


def trial(work: Path, launcher: str, delay: float, env: dict[str, str]) -> dict[str, int]:
    root, markers = work / "sweep", work / "markers"
    markers.mkdir()
    argv = [sys.executable, str(work / "driver.py"), str(root), str(markers), launcher]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not any(root.glob("*/mushin_status.json")) and proc.poll() is None:
        if time.monotonic() > deadline:  # the first cell has started: the sweep's span
            raise RuntimeError("the sweep never started")
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    bad = set(corrupt(root)) if root.exists() else set()
    mid = any(b'"running"' in p.read_bytes() for p in root.glob("*/mushin_status.json"))
    deadline, refused = time.monotonic() + 300, 0
    while True:  # resume; cells of the killed driver that still run make it refuse
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode == 0 or "still running" not in done.stderr:
            break
        refused = 1
        if time.monotonic() > deadline:
            raise RuntimeError("cells of the killed driver never ended")
        time.sleep(0.5)
    if done.returncode != 0:
        raise RuntimeError(f"resume failed: {done.stderr[-2000:]}")
    bad |= set(corrupt(root))
    return {"mid": int(mid), **outcome(root, markers), "corrupt": len(bad), "refused": refused}


def outcome(root: Path, markers: Path) -> dict[str, int]:
    """The cells of x=1..4 not ``completed`` with the right metrics (lost), and those
    whose task finished more than once (two markers: computed twice)."""
    lost = twice = 0
    for x in (1, 2, 3, 4):
        status = json.loads((root / f"x={x}" / "mushin_status.json").read_text())
        metrics = json.loads((root / f"x={x}" / "mushin_metrics.json").read_text())
        lost += status["status"] != "completed" or metrics != {"x2": 2 * x}
        twice += len(list(markers.glob(f"x={x}.*.done"))) > 1
    return {"lost": lost, "twice": twice}


def kill_trials(trials: int, seed: int, launchers: list[str]) -> None:
    rng = random.Random(seed)
    print(
        "| launcher | trials | killed with a cell running | cells lost | cells computed twice "
        "| files left corrupt | resumes refused (cells still running) |"
    )
    print("|---|---|---|---|---|---|---|")
    for launcher in launchers:
        total = dict.fromkeys(("mid", "lost", "twice", "corrupt", "refused"), 0)
        for _ in range(trials):
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                (work / "battery_task.py").write_text(TASK)
                (work / "driver.py").write_text(DRIVER)
                env = {**os.environ, "PYTHONPATH": str(work)}
                # from its first cell's start, the sweep's span: 4 cells of 2 s, one after
                # the other in this process (basic) or side by side (submitit_local)
                span = 8.0 if launcher == "basic" else 2.5
                found = trial(work, launcher, rng.uniform(0.0, span), env)
                for key in total:
                    total[key] += found[key]
        row = [launcher, trials, *total.values()]
        print("| " + " | ".join(map(str, row)) + " |", flush=True)


EXP = """
import os, time, uuid
from pathlib import Path
from mushin_box import Workflow
def task(x: int = 1, markers: str = "") -> dict:
    time.sleep(2)
    Path(markers, f"x={x}.{uuid.uuid4().hex}.done").write_text(str(os.getpid()))
    return {"x2": 2 * x}
workflow = Workflow(task)
"""


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mushin_box", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def resume_trial(work: Path, delay: float) -> dict[str, int]:
    """A 4-cell SLURM sweep launched held and cancelled, then ``resume DIR`` killed with
    SIGKILL ``delay`` seconds after it started (negative: once its jobs are queued); then
    ``status`` and ``resume DIR`` until it completes (a resume refused while jobs of the
    killed one are live: ``wait``, then again)."""
    root, markers = work / "sweep", work / "markers"
    markers.mkdir()
    (work / "exp.py").write_text(EXP)
    held = ["--time", "5", "--sbatch", "begin=now+1hour", "--detach"]
    for args in (["launch", "exp.py", "x=1,2,3,4", f"markers={markers}", *held,
                  "--working-dir", str(root)], ["cancel", str(root)]):  # fmt: skip
        if (done := cli(*args, cwd=work)).returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr[-2000:]}")
    again = [sys.executable, "-m", "mushin_box", "resume", str(root), "--sbatch", "begin=now"]
    proc = subprocess.Popen(
        [*again, "--no-progress"], cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if delay >= 0:
        time.sleep(delay)
    else:  # at the submission: as soon as the queue shows a job with the sweep's mark
        queued, deadline = False, time.monotonic() + 60
        while not queued and proc.poll() is None and time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "--me", "-o", "%k"], capture_output=True,
                                 text=True, timeout=30).stdout  # fmt: skip
            queued = f"mushin-box-sweep={root}" in out
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    bad = set(corrupt(root))
    status = cli("status", str(root), "--json", cwd=work)
    if status.returncode not in (0, 1, 3):  # completed; not; cells still live
        raise RuntimeError(f"status after the kill failed: {status.stderr[-2000:]}")
    refused, unrecorded, deadline = 0, 0, time.monotonic() + 300
    while True:
        done = cli("resume", str(root), "--sbatch", "begin=now", "--no-progress", cwd=work)
        said = done.stderr + done.stdout
        live = ("still live", "still running", "sweep's mark")  # its jobs, cells, strays
        if done.returncode == 0 or not any(word in said for word in live):
            break
        refused = 1
        unrecorded |= "sweep's mark" in said
        cli("wait", str(root), cwd=work)
        if time.monotonic() > deadline:
            raise RuntimeError("the killed resume's jobs never ended")
    if done.returncode != 0:
        raise RuntimeError(f"resume failed: {done.stdout[-1000:]}{done.stderr[-2000:]}")
    bad |= set(corrupt(root))
    found = {**outcome(root, markers), "corrupt": len(bad), "refused": refused}
    return {**found, "unrecorded": unrecorded}


def resume_trials(trials: int, seed: int) -> None:
    """``resume_trial`` at random moments of a resume's span (about 7 s on the local
    cluster: planning, the submission, the cells, the summary), every other one at the
    moment its jobs are queued, when their ids may not be recorded yet."""
    if not os.environ.get("SLURM_CONF"):
        print("SLURM resume trials skipped: no SLURM_CONF (scripts/local-slurm start)")
        return
    rng = random.Random(seed)
    total = dict.fromkeys(("lost", "twice", "corrupt", "refused", "unrecorded"), 0)
    for n in range(trials):
        with tempfile.TemporaryDirectory() as tmp:
            found = resume_trial(Path(tmp), rng.uniform(0.0, 7.0) if n % 2 else -1.0)
        for key in total:
            total[key] += found[key]
    print(
        "| trials | cells lost | cells computed twice | files left corrupt "
        "| resumes refused (jobs still live) | of them, for jobs no record named "
        "|\n|---|---|---|---|---|---|"
    )
    print("| " + " | ".join(map(str, [trials, *total.values()])) + " |", flush=True)


def disk_levels(levels: list[str]) -> None:
    if os.geteuid() != 0:
        print("disk-full levels skipped: mounting a tmpfs needs root")
        return
    print(
        "| free pages | raised | cells recorded (failed with ENOSPC) | empty or corrupt files "
        "| after making room and resuming |"
    )
    print("|---|---|---|---|---|")
    for level in levels:
        # "task": room for the sweep, and cell x=2 fills the disk with a 4 MiB "checkpoint"
        pages = 64 if level == "task" else int(level)
        env = {**os.environ, "BATTERY_FILL": "1" if level == "task" else ""}
        with tempfile.TemporaryDirectory() as tmp:
            disk = Path(tmp, "disk")
            disk.mkdir()
            mount = ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)]
            subprocess.run(mount, check=True)
            try:
                script = Path(tmp, "disk_sweep.py")
                script.write_text(DISK)
                st = os.statvfs(disk)
                filler = disk / "filler"
                filler.write_bytes(b"\0" * max(0, (st.f_bavail - pages) * st.f_frsize))
                root = disk / "sweep"
                run = [sys.executable, str(script), str(root)]
                first = said(subprocess.run(run, capture_output=True, text=True, env=env).stdout)
                statuses = [
                    json.loads(p.read_text()) for p in sorted(root.glob("*/mushin_status.json"))
                ]
                recorded = (
                    ", ".join(
                        f"{s['cell']} {s['status']}"
                        + (" (ENOSPC)" if "No space" in str(s.get("error")) else "")
                        for s in statuses
                    )
                    or "none"
                )
                bad = len(corrupt(root)) if root.exists() else 0
                filler.unlink()
                for big in root.glob("*/big.bin"):
                    big.unlink()
                again = said(subprocess.run(run, capture_output=True, text=True).stdout)
                done = sum(
                    json.loads(p.read_text())["status"] == "completed"
                    for p in root.glob("*/mushin_status.json")
                )
                after = f"raised {again}; {done}/3 completed"
                name = "64, a task fills it" if level == "task" else level
                print(f"| {name} | {first} | {recorded} | {bad} | {after} |", flush=True)
            finally:
                subprocess.run(["umount", "-l", str(disk)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__ or "").split("\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="kill -9 trials per launcher")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    parser.add_argument("--launchers", default="basic,submitit_local")
    parser.add_argument(
        "--levels", default="0,1,2,3,5,8,12,20,task", help="free pages (task: a task fills it)"
    )
    parser.add_argument(
        "--slurm-resume", type=int, default=0, help="kill -9 trials of a SLURM resume DIR"
    )
    args = parser.parse_args()
    if args.slurm_resume:
        resume_trials(args.slurm_resume, args.seed)
    if args.trials:
        kill_trials(args.trials, args.seed, args.launchers.split(","))
    if args.levels:
        disk_levels(args.levels.split(","))


if __name__ == "__main__":
    main()
