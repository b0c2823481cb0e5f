# SPDX-License-Identifier: MIT
"""A sweep larger than the cluster's MaxArraySize goes as several job arrays, at most
``--max-parallel`` of its cells run at once across all of them, and status/wait/cancel ask
squeue and sacct once per sweep however many cells and arrays it has.

The fast tests use stand-ins for the SLURM tools; the ``slurm`` ones run on the local
cluster with small arrays (``max_array_tasks``), so that the cluster's own MaxArraySize
(1001) stays as every other test expects it."""

from __future__ import annotations

import heapq
import json
import os
import pwd
import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mushin_box._slurm.arrays import array_limit, split_sweep, submit_cells
from mushin_box._slurm.jobs import job_states, queued_jobs

# ------------------------------------------------------------------ the split and the throttle


def _most_running(parts: list[Any], rng: random.Random) -> tuple[int, int]:
    """Run the arrays as SLURM would (each array starts its tasks in order, at most its
    ``%N`` at once, and only after the array it depends on has ended), with random cell
    durations; (the most cells running at one time, the cells run)."""
    done_at: dict[int, float] = {}
    running: list[tuple[float, int]] = []  # (end, array)
    queue = {i: list(range(p.cells)) for i, p in enumerate(parts)}
    live = dict.fromkeys(range(len(parts)), 0)
    now, most, ran = 0.0, 0, 0
    while True:
        for i, p in enumerate(parts):
            ready = p.after is None or p.after in done_at
            while ready and queue[i] and live[i] < p.parallelism:
                queue[i].pop(0)
                live[i] += 1
                heapq.heappush(running, (now + rng.uniform(0.1, 10.0), i))
        most = max(most, len(running))
        if not running:
            return most, ran
        now, i = heapq.heappop(running)
        live[i] -= 1
        ran += 1
        if not queue[i] and live[i] == 0:
            done_at[i] = now


@pytest.mark.parametrize(
    ("cells", "limit", "parallel"),
    [(2500, 1001, 256), (2500, 1001, 2000), (2500, 1001, 5000), (5, 2, 2), (7, 3, 1),
     (10, 1, 3), (1001, 1001, 4), (10000, 1001, 50), (10, None, 4), (9, 4, 8)],
)  # fmt: skip
def test_every_cell_runs_in_arrays_within_the_limit_and_at_most_n_at_once(
    cells: int, limit: int | None, parallel: int
) -> None:
    parts = split_sweep(cells, limit, parallel)
    assert [p.first for p in parts] == [sum(q.cells for q in parts[:i]) for i in range(len(parts))]
    assert sum(p.cells for p in parts) == cells  # every cell, once, in the launcher's order
    if limit is not None:
        assert max(p.cells for p in parts) <= limit
        assert len(parts) == -(-cells // limit)  # as few arrays as the limit allows
    assert max(p.cells for p in parts) - min(p.cells for p in parts) <= 1
    rng = random.Random(cells * 31 + parallel)
    for _ in range(5):  # whatever the cells' durations
        most, ran = _most_running(parts, rng)
        assert ran == cells
        assert most <= parallel
        assert most == min(parallel, max(p.cells for p in parts)) or len(parts) > 1


def test_a_sweep_that_fits_the_throttle_runs_its_arrays_side_by_side() -> None:
    parts = split_sweep(2500, 1001, 2500)
    assert [p.after for p in parts] == [None, None, None]
    assert [p.after for p in split_sweep(2500, 1001, 256)] == [None, 0, 1]


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("MaxArraySize            = 1001\nMaxJobCount = 10000\n", 1001),
        ("MaxArraySize = 4000001\nSchedulerParameters = bf_continue,max_array_tasks=1000", 1000),
        ("MaxArraySize = 10\nSchedulerParameters = max_array_tasks=5000", 10),
        ("MaxArraySize = 0\n", 1),  # arrays disabled: a plain job per cell
        ("SchedulerParameters = (null)\n", None),
        ("", None),
    ],
)
def test_the_array_limit_is_read_from_scontrol_show_config(text: str, limit: int | None) -> None:
    assert array_limit(text) == limit


# ------------------------------------------------------------------ stand-ins for SLURM's tools

# squeue/sacct/scancel/scontrol stand-ins: each logs its argv; squeue -r and sacct print
# every task of an array asked by its id (as the real ones do), from states.json; scontrol
# prints MaxArraySize from max_array_size; sbatch --test-only refuses an array over it
_TOOL = textwrap.dedent(
    """\
    #!{python}
    import json, os, pwd, re, sys
    here = os.path.dirname(os.path.abspath(__file__))
    name = os.path.basename(sys.argv[0])
    with open(os.path.join(here, "calls.jsonl"), "a") as log:
        log.write(json.dumps([name, *sys.argv[1:]]) + "\\n")
    limit = open(os.path.join(here, "max_array_size")).read().strip()
    if name == "scontrol":
        if sys.argv[1:] == ["ping"]:
            print("Slurmctld(primary) at standin is UP")
        else:
            print(f"MaxArraySize            = {{limit}}")
        sys.exit(0)
    if name == "sbatch":
        script = sys.stdin.read()
        array = re.search(r"--array=0-([0-9]+)", script)
        if array and int(array.group(1)) >= int(limit):
            print("sbatch: error: Batch job submission failed: Invalid job array "
                  "specification", file=sys.stderr)
            sys.exit(1)
        print("sbatch: Job 1 to start at 2026-01-01T00:00:00", file=sys.stderr)
        sys.exit(0)
    states = json.load(open(os.path.join(here, "states.json")))
    if name in ("squeue", "sacct") and "-j" in sys.argv:
        asked = sys.argv[sys.argv.index("-j") + 1].split(",")
        for job in [j for j in states if j in asked or j.split("_")[0] in asked]:
            state, _, comment = states[job].partition("|")
            user = f"|{{pwd.getpwuid(os.getuid()).pw_name}}" if "%u" in sys.argv[-1] else ""
            tail = f"{{user}}|{{comment}}" if name == "squeue" else ""
            print(f"{{job}}|{{state}}{{tail}}")
    """
)


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("squeue", "sacct", "scancel", "scontrol", "sbatch", "srun", "sinfo"):
        (folder / name).write_text(_TOOL.format(python=sys.executable))
        (folder / name).chmod(0o755)
    (folder / "states.json").write_text("{}")
    (folder / "max_array_size").write_text("1001")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    return folder


def _calls(tools: Path, name: str) -> list[list[str]]:
    path = tools / "calls.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [c[1:] for c in map(json.loads, lines) if c[0] == name]


def test_twelve_thousand_cells_states_come_from_one_squeue_and_one_sacct_call(
    tools: Path,
) -> None:
    # 12,000 task ids of 8-digit arrays are 156 KB on one argument: more than Linux passes
    # to a program (E2BIG), so asking by task id answered "unknown" for every cell
    arrays = [str(40_000_000 + i) for i in range(12)]
    ids = [f"{a}_{t}" for a in arrays for t in range(1000)]
    states = {j: ("RUNNING" if j.startswith(arrays[-1]) else "PENDING") for j in ids[6000:]}
    states["39999999_7"] = "RUNNING"  # another sweep's array: never asked about, never shown
    (tools / "states.json").write_text(json.dumps(states))
    found = job_states(ids)
    squeue, sacct = _calls(tools, "squeue"), _calls(tools, "sacct")
    assert len(squeue) == 1 and len(sacct) == 1
    assert squeue[0][squeue[0].index("-j") + 1] == ",".join(arrays)
    assert sacct[0][sacct[0].index("-j") + 1] == ",".join(arrays[:6])  # those squeue lacks
    assert found == {j: states[j] for j in ids[6000:]}  # the first 6,000: ended, unknown to both
    assert "39999999_7" not in found


def test_scancel_gets_each_array_s_tasks_as_one_expression_naming_exactly_them() -> None:
    from mushin_box._slurm.jobs import SCANCEL_EXPRESSION_CHARS, scancel_args

    ids = [f"77_{t}" for t in range(1000) if t != 500] + ["78_4", "9", "79_3", "79_4"]
    assert scancel_args(ids) == ["77_[0-499,501-999]", "78_4", "79_[3-4]", "9"]
    every_other = scancel_args(f"80_{t}" for t in range(0, 4000, 2))
    assert len(every_other) > 1 and all(len(a) <= SCANCEL_EXPRESSION_CHARS for a in every_other)
    named = {int(n) for a in every_other for n in a[4:-1].split(",")}
    assert named == set(range(0, 4000, 2))  # every task asked for, and no other


def test_cancel_asks_squeue_once_by_array(tools: Path) -> None:
    (tools / "states.json").write_text(
        json.dumps({"71_0": "RUNNING|mark", "71_1": "PENDING|mark", "72_0": "PENDING|mark"})
    )
    assert queued_jobs(["71_1", "72_0"]) == {
        "71_1": ("PENDING", "mark", pwd.getpwuid(os.getuid()).pw_name),
        "72_0": ("PENDING", "mark", pwd.getpwuid(os.getuid()).pw_name),
    }
    (call,) = _calls(tools, "squeue")
    assert call[call.index("-j") + 1] == "71,72"


class _Job:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


class _Executor:
    """submitit's SlurmExecutor as submit_cells uses it: parameters, update_parameters,
    map_array (an array id per call; ``refuse_at``: that call fails as sbatch would)."""

    def __init__(self, refuse_at: int | None = None, **extra: Any) -> None:
        self.parameters: dict[str, Any] = {"additional_parameters": dict(extra)}
        self.submitted: list[dict[str, Any]] = []
        self.refuse_at = refuse_at

    def update_parameters(self, **kwargs: Any) -> None:
        self.parameters.update(kwargs)

    def map_array(self, fn: Any, *columns: list[Any]) -> list[_Job]:
        if len(self.submitted) == self.refuse_at:
            error = subprocess.CalledProcessError(1, ["sbatch"], stderr="QOSMaxSubmitJobPerUser")
            raise RuntimeError("sbatch failed") from error
        array = str(500 + len(self.submitted))
        self.submitted.append({**self.parameters, "cells": [list(c) for c in columns]})
        n = len(columns[0])
        return [_Job(f"{array}_{i}" if n > 1 else array) for i in range(n)]


def test_later_arrays_wait_for_earlier_ones_and_every_array_is_recorded_at_once() -> None:
    executor = _Executor(dependency="afterok:42", mail_type="END")
    recorded: list[list[str]] = []
    cells = [f"x={i}" for i in range(5)]
    jobs = submit_cells(
        executor,
        print,
        [cells, list(range(5))],
        split_sweep(5, 2, 2),
        lambda js: recorded.append([j.job_id for j in js]),
    )
    assert [j.job_id for j in jobs] == ["500_0", "500_1", "501_0", "501_1", "502"]
    assert [s["cells"][0] for s in executor.submitted] == [cells[:2], cells[2:4], cells[4:]]
    deps = [s["additional_parameters"]["dependency"] for s in executor.submitted]
    assert deps == ["afterok:42", "afterany:500", "afterany:501"]  # the user's, then the chain
    assert all(s["additional_parameters"]["mail_type"] == "END" for s in executor.submitted)
    assert [s["array_parallelism"] for s in executor.submitted] == [2, 2, 1]
    assert [len(r) for r in recorded] == [2, 4, 5]  # written down array by array


def test_a_refused_later_array_cancels_the_arrays_before_it(tools: Path) -> None:
    executor = _Executor(refuse_at=2)
    recorded: list[list[str]] = []
    with pytest.raises(RuntimeError, match="sbatch failed"):  # sbatch's error, as it came
        submit_cells(
            executor,
            print,
            [list(range(6))],
            split_sweep(6, 2, 6),
            lambda js: recorded.append([j.job_id for j in js]),
        )
    assert _calls(tools, "scancel") == [["--", "500", "501"]]
    assert recorded[-1] == ["500_0", "500_1", "501_0", "501_1"]


# ------------------------------------------------------------------ launch --max-parallel

WORKFLOW_EXP = """
from mushin_box import Workflow


def task(x: int = 1) -> dict:
    return {"y": float(x)}


workflow = Workflow(task)
"""


def _launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exp = tmp_path / "exp.py"
    exp.write_text(WORKFLOW_EXP)
    return subprocess.run(
        [sys.executable, "-m", "mushin_box", "launch", str(exp), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_the_dry_run_shows_the_arrays_and_sbatch_accepts_the_first(
    tmp_path: Path, tools: Path
) -> None:
    (tools / "max_array_size").write_text("4")
    sweep = "x=" + ",".join(str(i) for i in range(10))
    proc = _launch(tmp_path, "--slurm", "--dry-run", "--max-parallel", "3", sweep)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "arrays      3 job arrays (4, 3, 3 cells; at most 4 per array), each after the one "
        "before ends, at most 3 cells at once" in proc.stdout
    )
    assert "#SBATCH --array=0-3%3" in proc.stdout
    assert "array_parallelism = 3   (--max-parallel)" in proc.stdout
    (test_only,) = [c for c in _calls(tools, "sbatch") if c == ["--test-only"]]
    assert test_only  # the first array's script, which the cluster accepts


def test_max_array_tasks_bounds_the_arrays_below_the_cluster_s_limit(
    tmp_path: Path, tools: Path
) -> None:
    sweep = "x=" + ",".join(str(i) for i in range(10))
    args = ["--slurm", "--dry-run", sweep, "hydra.launcher.max_array_tasks=4"]
    proc = _launch(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 job arrays (4, 3, 3 cells; at most 4 per array), all at once" in proc.stdout


def test_a_resume_replays_max_parallel_and_may_change_it() -> None:
    from mushin_box._launch.record import launch_record
    from mushin_box._launch.resume import launch_argv, resume_settings

    record = launch_record("x.py", ["x=1,2"], {"max_parallel": 8, "nodes": 1}, cwd="/p")
    assert launch_argv(record["flags"]) == ["--max-parallel", "8", "--nodes", "1"]
    _, flags, _ = resume_settings(record, {"max_parallel": 3}, [])
    assert flags["max_parallel"] == 3


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_bad_max_parallel_is_one_line_naming_the_fix(tmp_path: Path, value: str) -> None:
    proc = _launch(tmp_path, "--local", "--dry-run", "--max-parallel", value)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "--max-parallel" in line and "positive integer" in line and "e.g." in line


def test_a_profile_s_max_parallel_reaches_the_launcher_and_the_flag_wins(tmp_path: Path) -> None:
    from mushin_box._launch.options import resolve_options

    (tmp_path / "mushin-box.toml").write_text("[profiles.default]\nmax-parallel = 40\n")
    opts = resolve_options({}, None, default_name="exp", cwd=tmp_path)
    assert opts.slurm.array_parallelism == 40
    assert opts.slurm.sources["array_parallelism"].startswith("profile default")
    opts = resolve_options({"max_parallel": 8}, None, default_name="exp", cwd=tmp_path)
    assert (opts.slurm.array_parallelism, opts.slurm.sources["array_parallelism"]) == (
        8,
        "--max-parallel",
    )
    (tmp_path / "mushin-box.toml").write_text("[profiles.default]\nmax-parallel = 0\n")
    with pytest.raises(ValueError, match="max-parallel must be a positive integer"):
        resolve_options({}, None, default_name="exp", cwd=tmp_path)


# ------------------------------------------------------------------ on the local cluster


def sleepy_task(x: int, sleep_s: float = 1.0) -> dict[str, float]:
    time.sleep(sleep_s)
    return {"y": float(x)}


def _sacct_times(job_ids: list[str]) -> dict[str, tuple[int, int]]:
    """Each job's start and end, from accounting. slurmdbd records an end a moment after
    the job left the queue ("Unknown" until then): asked again, for up to 30 s."""
    import datetime as dt

    from mushin_box._slurm.jobs import asked_ids

    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", asked_ids(job_ids), "-o", "JobID,Start,End",
             "--noconvert"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        rows = [line.split("|") for line in out.splitlines() if line.split("|")[0] in job_ids]
        if not any("Unknown" in r[1:] for r in rows) or time.monotonic() > deadline:
            break
        time.sleep(0.5)

    def seconds(text: str) -> int:
        return int(dt.datetime.fromisoformat(text).timestamp())

    return {r[0]: (seconds(r[1]), seconds(r[2])) for r in rows}


@pytest.mark.slurm
@pytest.mark.slow
def test_five_cells_over_arrays_of_two_run_every_cell_two_at_a_time(
    tmp_path: Path, slurm_cluster: Any
) -> None:
    from mushin_box import Workflow, multirun, submitit_slurm_config
    from mushin_box._slurm.submitted import job_ids, read_submission

    config = {
        **submitit_slurm_config(nodes=1, gpus_per_node=1, timeout_min=5, array_parallelism=2),
        "max_array_tasks": 2,
        "poll_interval_s": 1.0,
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
    }
    root = tmp_path / "sweep"
    ds = Workflow(sleepy_task).run(
        working_dir=root,
        launcher="mushin_slurm",
        launcher_config=config,
        progress=False,
        x=multirun([0, 1, 2, 3, 4]),
        sleep_s=3.0,
    )
    assert ds["status"].values.tolist() == ["completed"] * 5
    jobs = job_ids(read_submission(root))
    arrays = list(dict.fromkeys(j.split("_")[0] for j in jobs))
    assert len(jobs) == 5 and len(arrays) == 3  # 2 + 2 + 1, every one recorded
    times = _sacct_times(jobs)
    assert sorted(times) == sorted(jobs)
    for i in range(1, 3):  # an array starts once the one before it has ended
        before = max(end for j, (_, end) in times.items() if j.split("_")[0] == arrays[i - 1])
        first = min(start for j, (start, _) in times.items() if j.split("_")[0] == arrays[i])
        assert first >= before
    for start, _end in times.values():  # never more than 2 cells at once
        at_once = sum(1 for s, e in times.values() if s <= start < e)
        assert at_once <= 2


@pytest.fixture
def counted_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """squeue and sacct that log their argv, then run the real ones."""
    folder = tmp_path / "counted"
    folder.mkdir()
    for name in ("squeue", "sacct"):
        real = subprocess.run(["which", name], capture_output=True, text=True).stdout.strip()
        (folder / name).write_text(
            f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{folder}/calls"\nexec {real} "$@"\n'
        )
        (folder / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def _counted(folder: Path) -> list[str]:
    path = folder / "calls"
    calls = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return calls


@pytest.mark.slurm
@pytest.mark.slow
def test_status_wait_and_cancel_ask_once_for_a_sweep_of_several_arrays(
    tmp_path: Path, slurm_cluster: Any, counted_tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mushin_box import Workflow, multirun, submitit_slurm_config
    from mushin_box._slurm.submitted import job_ids, read_submission
    from mushin_box.cli.main import main

    config = {
        **submitit_slurm_config(nodes=1, gpus_per_node=1, timeout_min=5, array_parallelism=1),
        "max_array_tasks": 2,
        "submitit_folder": str(tmp_path / "submitit" / "%j"),
    }
    root = tmp_path / "sweep"
    Workflow(sleepy_task).run(
        working_dir=root,
        launcher="mushin_slurm",
        launcher_config=config,
        progress=False,
        wait=False,
        x=multirun([0, 1, 2, 3, 4, 5]),
        sleep_s=60.0,
    )
    jobs = job_ids(read_submission(root))
    arrays = sorted({j.split("_")[0] for j in jobs})
    assert len(jobs) == 6 and len(arrays) == 3
    _counted(counted_tools)

    capsys.readouterr()
    assert main(["status", str(root), "--json"]) == 3
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert {c["state"] for c in cells} <= {"pending", "running"} and len(cells) == 6
    calls = _counted(counted_tools)
    assert len(calls) <= 2 and calls[0].startswith("squeue")  # squeue, and sacct if at all
    assert calls[0].split(" -j ")[1].split()[0] == ",".join(arrays)  # by array, not by cell

    assert main(["wait", str(root), "--timeout", "1", "--no-progress"]) == 3
    assert 1 <= len([c for c in _counted(counted_tools) if c.startswith("squeue")]) <= 3

    capsys.readouterr()
    assert main(["cancel", str(root)]) in (0, 1)
    scancel = [line for line in capsys.readouterr().out.splitlines() if line.startswith("scancel")]
    assert scancel == [f"scancel {arrays[0]}_[0-1] {arrays[1]}_[0-1] {arrays[2]}_[0-1]"]
    calls = _counted(counted_tools)
    for call in calls:  # each names arrays, never the cells' tasks
        assert set(call.split(" -j ")[1].split()[0].split(",")) <= set(arrays), call
    assert len(calls) < 60  # polls until the jobs are gone, never once per cell
    capsys.readouterr()
    assert main(["status", str(root), "--json"]) == 1
    states = [c["state"] for c in json.loads(capsys.readouterr().out)["cells"]]
    assert states == ["cancelled"] * 6
    queue = subprocess.run(
        ["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i"],
        capture_output=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    assert queue == []


def test_a_detached_launch_of_a_big_sweep_names_its_arrays_not_every_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from mushin_box._slurm.submitted import record_submission
    from mushin_box.cli.launch import _detached  # pyright: ignore[reportPrivateUsage]

    jobs = [f"{a}_{t}" for a, n in (("70", 834), ("71", 833), ("72", 833)) for t in range(n)]
    record_submission(tmp_path, "slurm", [(j, [f"x={i}"]) for i, j in enumerate(jobs)])
    assert _detached(SimpleNamespace(working_dir=tmp_path, job_ids=jobs), {}) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "[mushin-box launch] submitted 2500 job(s) in 3 array(s): 70 71 72"
    _detached(SimpleNamespace(working_dir=tmp_path, job_ids=jobs[:2]), {})
    assert capsys.readouterr().out.splitlines()[0].endswith("submitted 2 job(s): 70_0 70_1")
