#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""What a bigger world costs: ``examples/exp.py`` launched at 1 to 64 ranks, measured whole.

    eval "$(scripts/local-slurm env)"
    .venv/bin/python scripts/bench/world.py                          # 1,2,8,16,32,64 ranks
    .venv/bin/python scripts/bench/world.py --sizes 1,2,8 --json out.json

Each size runs ``mushin-box launch examples/exp.py --no-progress trainer.max_epochs=2
datamodule.global_batch_size=64`` through the real CLI, into its own ``--working-dir``, with
two launchers: SLURM tasks (``--slurm --nodes N --gpus G``: one task a rank) and torchrun
agents (``--slurm --torchrun --nodes N --gpus G``: one task a node, its agent starting G
workers). World size W is N x G: 1 = 1x1, 2 = 1x2, 8 = 2x4, 16 = 4x4, 32 = 4x8, 64 = 8x8; a
size the cluster's up nodes (``sinfo``: nodes with at least G GPUs and G CPUs) cannot hold
is skipped, with the reason. The baseline is one rank ``--local`` (no SLURM), run once in
this process, so that every ratio compares runs of the same minutes on the same machine.
The data module's global batch is the same at any W, so every run fits the same model: the
metrics must match the baseline's (``diff --atol 1e-6`` exits 0).

Measured for each run, and as a ratio to the baseline:

- ``wall_s``: ``launch`` from its start to its exit (the summary printed);
- ``rendezvous_s``: from the launch's start to the moment every rank had joined the process
  group: the timestamp of rank 0's Lightning record "All distributed processes registered.
  Starting with W processes", which Lightning logs once ``init_process_group`` returned on
  rank 0, that is once all W members connected. Read from the cell's rank logs (the files
  its ``mushin_status.json`` lists under ``logs``, which ``mushin-box logs DIR --rank R``
  prints, and the Hydra job log ``mushin_workflow.log`` that every rank appends to): they
  are what the cell writes anyway, with Hydra's timestamps (to the millisecond, local time,
  the clock of this machine, where the local cluster's nodes run too). ``members_s`` is the
  last "Initializing distributed: GLOBAL_RANK: r, MEMBER: k/W" record, when the last rank
  began to join (``members_seen`` of ``members_world`` are kept). The baseline has no such
  record: ``--local`` keeps no rank log (its ``mushin_workflow.log`` stays empty), so its
  point is ``ready_s``, the newest ``.mushin/seeds/rankR.json`` file's time, which every
  rank writes just before it builds the model and joins the group (0.1-0.5 s before its
  "Initializing distributed" record); ``ready_s`` is kept for every run too. Why the logs
  and not sidecar timestamps: no sidecar is written once the group exists (the seeds come
  before it, the ranks' ``.mushin/ranks/rankR.json`` at the end), and no extra
  instrumentation runs in the ranks: the numbers are those of an ordinary launch;
- ``rank_mb``: one rank's peak resident memory, the biggest ``VmHWM`` of the job's
  processes other than the launch itself (``--local`` runs its one rank in the launch:
  there the launch counts); ``job_mb``: the whole job's peak, the biggest sum of ``VmRSS``
  over all its processes (the launch included) at one sample; ``driver_mb``: the launch's
  own ``VmHWM``; ``processes``: how many were seen.
  The local cluster keeps no memory accounting (``JobAcctGatherType=jobacct_gather/none``),
  so a thread samples ``/proc`` every 0.2 s while the launch runs: the job's processes are
  those whose environment holds ``MUSHIN_BENCH_TAG=<a uuid of the run>``, which the launch's
  environment carries (SLURM exports the submitting environment to the tasks; torchrun's
  workers inherit their agent's). RSS counts shared pages (torch's libraries) in each
  process, so ``job_mb`` is an upper bound of what the job holds;
- ``sweep_bytes``: every file under the sweep directory (``.submitit/`` included);
  ``cell_bytes``: the cell's files without its checkpoints (``*.ckpt``) and
  ``fit_metrics.pt``: the sidecars that grow with the ranks;
- ``read_s``: each reading command of the cell, once, a fresh process each: ``status DIR``,
  ``logs DIR --rank 0``, ``show DIR``, ``diff ONE DIR --atol 1e-6`` (ONE: the baseline's
  sweep; its exit code and first line are kept: "same experiment, same results" and 0) and
  ``report DIR --output FILE``; on the baseline they run once untimed first (the disk's
  cache and the like warm for every run). They start once the job's last process has
  ended (``linger_s``: how long after the launch's summary that was; a SLURM task's rank
  is still tearing its interpreter down when the launch has its result), so that they
  measure the readers, not 64 exiting ranks on the same cores;
- ``gap``: max |B - A| of ``train_loss`` and of ``val_loss`` (the cells'
  ``mushin_metrics.json``) against the baseline.

Prints one table (per launcher and size a line of values, and under it their ratios to
the baseline; ``diff`` is "ok" or its exit code with a "!");
``--json PATH`` writes every raw number. Every wait is bounded: a launch past ``--timeout``
is stopped and its jobs cancelled (``scancel`` of the ids in its ``mushin_jobs.json``, and
of its job name, unique to the run). Needs a SLURM cluster (``scontrol ping``) for all but
the baseline: without one, it writes ``{"skipped": why}``. One run at a time: 64 ranks on
the local cluster of one 2-core machine take minutes each (the ranks' starts run one after
another), so CI never runs it; ``scripts/bench/run --only world`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
_VENV_BOX = REPO / ".venv" / "bin" / "mushin-box"
BOX = [str(_VENV_BOX)] if _VENV_BOX.exists() else [sys.executable, "-m", "mushin_box"]
EXPERIMENT = REPO / "examples" / "exp.py"
RUN_ARGS = ["--no-progress", "trainer.max_epochs=2", "datamodule.global_batch_size=64"]
#: world size -> (nodes, ranks a node)
SHAPES = {1: (1, 1), 2: (1, 2), 8: (2, 4), 16: (4, 4), 32: (4, 8), 64: (8, 8)}
LAUNCHERS = {"slurm": ["--slurm"], "torchrun": ["--slurm", "--torchrun"]}
TAG = "MUSHIN_BENCH_TAG"
SAME = "same experiment, same results"
READERS = ("status", "logs", "show", "diff", "report")
METRICS = ("train_loss", "val_loss")
_RECORD = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[[^\]]*\]\[\w+\] - ")
_MEMBER = re.compile(r"Initializing distributed: GLOBAL_RANK: (\d+), MEMBER: \d+/(\d+)")
_REGISTERED = "All distributed processes registered"


class Sampler(threading.Thread):
    """Every ``interval`` seconds, the resident memory of the processes whose environment
    holds ``TAG=tag``: each one's ``VmHWM`` (its own peak) and the sum of their ``VmRSS``."""

    def __init__(self, tag: str, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.marker = f"\0{TAG}={tag}\0".encode()
        self.interval = interval
        self.done = threading.Event()
        self.hwm_kb: dict[int, int] = {}
        self.peak_sum_kb = 0
        self.samples = 0
        self.alive = 0  # the job's processes seen at the last sample

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)
        self.sample()

    def sample(self) -> None:
        total = alive = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:  # a process may end between the listing and the reads
                with open(f"/proc/{name}/environ", "rb") as env:
                    if self.marker not in b"\0" + env.read():
                        continue
                with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as st:
                    fields = dict(line.split(":", 1) for line in st if ":" in line)
                rss, hwm = int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
            except (OSError, KeyError, ValueError, IndexError):
                continue  # gone, not ours to read, or a kernel thread (no Vm* lines)
            total, alive = total + rss, alive + 1
            pid = int(name)
            self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), hwm)
        self.samples += 1
        self.alive = alive
        self.peak_sum_kb = max(self.peak_sum_kb, total)

    def gone(self, timeout: float) -> float | None:
        """Seconds until the job's last process has ended (None: still there after
        ``timeout``). The launch prints its summary once the cell is recorded, while a
        SLURM task's rank still tears its interpreter down: the readers are timed after."""
        t0 = time.time()
        while self.alive and time.time() - t0 < timeout:
            time.sleep(self.interval)
        return None if self.alive else time.time() - t0

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=30)


def cluster() -> tuple[list[tuple[int, int]], str | None]:
    """The up nodes' (CPUs, GPUs), or the reason there is no cluster to run on."""
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        if ping.returncode != 0 or " UP" not in ping.stdout:
            return [], "no SLURM cluster answers `scontrol ping` (scripts/local-slurm start)"
        out = subprocess.run(
            ["sinfo", "-N", "-h", "-o", "%N %c %G %t"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"no SLURM cluster: {exc}"
    nodes: dict[str, tuple[int, int]] = {}
    for line in out.splitlines():
        name, cpus, gres, state = line.split()
        if state.rstrip("*~#$@+-") not in ("idle", "mix", "alloc", "comp"):
            continue  # down, drained: it runs nothing
        gpus = sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres))
        nodes[name] = (int(cpus), gpus)  # a node in two partitions is listed twice
    return list(nodes.values()), None


def misfit(nodes: list[tuple[int, int]], n: int, g: int) -> str | None:
    """Why ``n`` nodes of ``g`` ranks do not fit ``nodes``, or None."""
    able = sum(1 for cpus, gpus in nodes if gpus >= g and cpus >= g)
    if able >= n:
        return None
    shapes = ", ".join(sorted({f"{gpus} GPUs/{cpus} CPUs" for cpus, gpus in nodes})) or "none"
    return f"needs {n} nodes of {g} GPUs and {g} CPUs; {able} of {len(nodes)} up nodes ({shapes})"


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def cell_of(sweep: Path) -> Path | None:
    return next((p.parent for p in sorted(sweep.glob("*/mushin_status.json"))), None)


def joined(cell: Path) -> dict[str, Any]:
    """From the cell's rank logs: when each rank began to join the process group (its
    "Initializing distributed" record) and when rank 0 saw all of them (the "All
    distributed processes registered" record); from its seeds files: when the last rank was
    ready to build its model. Epoch seconds, or None where a file says nothing."""
    try:
        status = json.loads((cell / "mushin_status.json").read_text())
    except (OSError, ValueError):
        status = {}
    files = [Path(p) for p in (status.get("logs") or {}).values()]
    files.append(cell / "mushin_workflow.log")
    members: dict[int, float] = {}
    world = registered = None
    for path in files:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        stamp = None
        for line in lines:
            head = _RECORD.match(line)
            stamp = _stamp(head.group(1)) if head else stamp
            member = _MEMBER.search(line)
            if member and stamp is not None:
                members[int(member.group(1))] = stamp
                world = int(member.group(2))
            if _REGISTERED in line and stamp is not None:
                registered = stamp if registered is None else min(registered, stamp)
    seeds = [p.stat().st_mtime for p in (cell / ".mushin" / "seeds").glob("rank*.json")]
    return {
        "registered": registered,
        "last_member": max(members.values()) if members else None,
        "members_seen": len(members),
        "members_world": world,
        "ready": max(seeds) if seeds else None,
        "seeds": len(seeds),
    }


def tree_bytes(root: Path, skip: tuple[str, ...] = ()) -> int:
    """The size of every file under ``root``, but those whose name matches a ``skip``."""
    total = 0
    for path in root.rglob("*"):
        if any(path.match(pattern) for pattern in skip):
            continue
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def cancel(sweep: Path, name: str) -> None:
    """Cancel what a stopped launch left queued or running: the ids it recorded, and every
    job of its (unique) name."""
    ids: list[str] = []
    try:
        jobs = json.loads((sweep / "mushin_jobs.json").read_text())["jobs"]
        ids = [str(j["job_id"]).split("_")[0] for j in jobs]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for argv in (["scancel", *dict.fromkeys(ids)], ["scancel", "--name", name]):
        if len(argv) > 1:
            subprocess.run(argv, capture_output=True, timeout=60)


def launch(flags: list[str], sweep: Path, work: Path, timeout: float) -> dict[str, Any]:
    """One ``mushin-box launch`` into ``sweep``, timed and its memory sampled."""
    tag = uuid.uuid4().hex
    name = f"bench-world-{tag[:12]}"
    argv = [*BOX, "launch", str(EXPERIMENT), *flags, "--working-dir", str(sweep), *RUN_ARGS]
    if "--slurm" in flags:  # the job's own limit: SLURM ends it where this script gives up
        argv += ["--job-name", name, "--time", str(math.ceil(timeout / 60) + 1)]
    sampler = Sampler(tag)
    sampler.start()
    t0 = time.time()
    proc = subprocess.Popen(
        argv,
        cwd=work,
        env={**os.environ, TAG: tag},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a stop reaches the launch and whatever it started here
    )
    try:
        said, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            said, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            said, _ = proc.communicate(timeout=30)
        code = None
        cancel(sweep, name)
    wall = time.time() - t0
    linger = sampler.gone(120)
    sampler.stop()
    driver = sampler.hwm_kb.get(proc.pid)
    # --local runs its one rank in the launch; on SLURM the ranks are other processes
    ranks = [kb for pid, kb in sampler.hwm_kb.items() if pid != proc.pid or "--local" in flags]
    rank = max(ranks, default=None)
    return {
        "argv": argv,
        "exit": code,
        "timed_out": code is None,
        "wall_s": wall,
        "started": t0,
        "tail": said[-2000:] if code != 0 else "",
        "rank_mb": rank / 1024 if rank else None,
        "job_mb": sampler.peak_sum_kb / 1024 if sampler.peak_sum_kb else None,
        "driver_mb": driver / 1024 if driver else None,
        "processes": len(sampler.hwm_kb),
        "samples": sampler.samples,
        "linger_s": linger,
    }


def _timed(argv: list[str], work: Path, timeout: float) -> tuple[float | None, int | None, str]:
    """Seconds, exit code and output of one fresh process (None, None when it timed out)."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=work, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None, ""
    return time.perf_counter() - t0, done.returncode, done.stdout + done.stderr


def read(sweep: Path, one: Path, work: Path, timeout: float) -> dict[str, Any]:
    """The reading commands on the sweep, each once, each a fresh process."""
    page = work / f"{sweep.name}-report.html"
    commands = {
        "status": ["status", str(sweep)],
        "logs": ["logs", str(sweep), "--rank", "0"],
        "show": ["show", str(sweep)],
        "diff": ["diff", str(one), str(sweep), "--atol", "1e-6"],
        "report": ["report", str(sweep), "--output", str(page)],
    }
    out: dict[str, Any] = {"read_s": {}, "read_exit": {}}
    for what, argv in commands.items():
        seconds, code, said = _timed([*BOX, *argv], work, timeout)
        out["read_s"][what], out["read_exit"][what] = seconds, code
        if what == "diff":
            out["diff_first_line"] = (said.strip().splitlines() or [""])[0]
    out["diff_ok"] = out["read_exit"]["diff"] == 0 and out["diff_first_line"] == SAME
    return out


def metrics(cell: Path | None) -> dict[str, float]:
    try:
        got = json.loads((cell / "mushin_metrics.json").read_text()) if cell else {}
    except (OSError, ValueError):
        return {}
    return {k: float(got[k]) for k in METRICS if isinstance(got.get(k), int | float)}


def measure(
    launcher: str,
    size: int,
    flags: list[str],
    work: Path,
    base: dict[str, Any] | None,
    timeout: float,
) -> dict[str, Any]:
    """One run, every measure; ``base`` is the baseline's (None: this is the baseline)."""
    sweep = work / f"{launcher}-{size}"
    nodes, gpus = SHAPES[size]
    run: dict[str, Any] = {"launcher": launcher, "size": size, "nodes": nodes, "gpus": gpus}
    run.update(launch(flags, sweep, work, timeout))
    cell = cell_of(sweep)
    times = joined(cell) if cell else {}
    for key, point in (
        ("rendezvous_s", "registered"),
        ("members_s", "last_member"),
        ("ready_s", "ready"),
    ):
        run[key] = times[point] - run["started"] if times.get(point) else None
    run.update({k: v for k, v in times.items() if k in ("members_seen", "members_world", "seeds")})
    run["sweep_bytes"] = tree_bytes(sweep)
    run["cell_bytes"] = tree_bytes(cell, ("*.ckpt", "fit_metrics.pt")) if cell else None
    run["metrics"] = metrics(cell)
    one = sweep if base is None else work / f"{base['launcher']}-{base['size']}"
    if base is None:  # the first reads of this process warm the disk cache: not timed
        read(sweep, one, work, timeout=min(timeout, 600))
    run.update(read(sweep, one, work, timeout=min(timeout, 600)))
    if base is not None:
        mine, theirs = run["metrics"], base["metrics"]
        run["gap"] = {
            k: abs(mine[k] - theirs[k]) if k in mine and k in theirs else None for k in METRICS
        }
    return run


#: the table's columns: title, the run's value, its format
COLUMNS: tuple[tuple[str, Any, str], ...] = (
    ("wall", lambda r: r["wall_s"], "{:.1f}s"),
    # one rank --local forms no group: its rank's arrival (see the module's doc)
    ("rdzv", lambda r: r["ready_s"] if r["launcher"] == "local" else r["rendezvous_s"], "{:.1f}s"),
    ("rank MB", lambda r: r["rank_mb"], "{:.0f}"),
    ("job MB", lambda r: r["job_mb"], "{:.0f}"),
    ("sweep KB", lambda r: r["sweep_bytes"] / 1024, "{:.0f}"),
    ("cell KB", lambda r: (r["cell_bytes"] or 0) / 1024, "{:.0f}"),
    *((what, (lambda w: lambda r: r["read_s"][w])(what), "{:.2f}s") for what in READERS),
)


def _ratio(value: Any, base: Any) -> str:
    return f"{value / base:.2f}x" if value is not None and base else "-"


def table(base: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """One row a run: each value over its ratio to the baseline; the diff and the gap."""
    head = f"{'launcher':<9}{'W':>3} {'NxG':>4} " + "".join(f"{c[0]:>10}" for c in COLUMNS)
    lines = [head + f"  {'diff':<5}{'gap train':>10}{'gap val':>10}", "-" * (len(head) + 27)]
    for run in [base, *runs]:
        values, ratios = [], []
        for _, get, fmt in COLUMNS:
            try:
                value, was = get(run), get(base)
            except (KeyError, TypeError):
                value = was = None
            values.append(fmt.format(value) if value is not None else "-")
            ratios.append(_ratio(value, was))
        gap = run.get("gap") or {}
        gaps = "".join(
            f"{gap[k]:>10.1e}" if gap.get(k) is not None else f"{'-':>10}" for k in METRICS
        )
        diff = "ok" if run["diff_ok"] else f"{run['read_exit']['diff']}!"
        shape = f"{run['nodes']}x{run['gpus']}"
        what = f"{run['launcher']:<9}{run['size']:>3} {shape:>4} "
        failed = "" if run["exit"] == 0 else f"  launch exit {run['exit']}"
        failed += " (timed out)" if run["timed_out"] else ""
        lines.append(what + "".join(f"{v:>10}" for v in values) + f"  {diff:<5}{gaps}{failed}")
        lines.append(" " * len(what) + "".join(f"{v:>10}" for v in ratios))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1,2,8,16,32,64", help="world sizes (of 1,2,8,16,32,64)")
    parser.add_argument("--launchers", default="slurm,torchrun", help="slurm, torchrun or both")
    parser.add_argument("--json", type=Path, default=None, help="write every raw number here")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a launch may take")
    parser.add_argument("--keep", action="store_true", help="keep the sweep directories")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    launchers = [name for name in args.launchers.split(",") if name]
    if set(sizes) - set(SHAPES) or set(launchers) - set(LAUNCHERS):
        parser.error(f"--sizes of {sorted(SHAPES)}, --launchers of {sorted(LAUNCHERS)}")
    result: dict[str, Any] = {"sizes": sizes, "launchers": launchers, "runs": [], "skips": []}
    nodes, why = cluster()
    result["cluster"] = {"nodes": nodes, "why_not": why}

    def done() -> int:
        if args.json:
            args.json.write_text(json.dumps(result, indent=2))
        return 0

    if why:
        result["skipped"] = why
        print(f"not run: {why}")
        return done()
    # the package's bytecode, as an install has it (as scripts/bench/run does): with
    # PYTHONDONTWRITEBYTECODE every command measured would compile what changed
    compile_ = [sys.executable, "-m", "compileall", "-q", str(REPO / "mushin_box")]
    subprocess.run([*compile_, str(REPO / "hydra_plugins")], capture_output=True, timeout=600)
    work = Path(tempfile.mkdtemp(prefix="bench-world-", dir=os.environ.get("BENCH_DIR")))
    try:
        base = measure("local", 1, ["--local"], work, None, args.timeout)
        result["baseline"] = base
        done()
        if base["exit"] != 0:
            result["skipped"] = f"the 1-rank --local baseline exited {base['exit']}"
            print(f"not run: {result['skipped']}\n{base['tail']}")
            return done()
        for size in sizes:
            n, g = SHAPES[size]
            reason = misfit(nodes, n, g)
            for name in launchers:
                if reason:
                    result["skips"].append({"launcher": name, "size": size, "why": reason})
                    print(f"skipped: {name} at {size} ranks ({n}x{g}): {reason}", flush=True)
                    continue
                flags = [*LAUNCHERS[name], "--nodes", str(n), "--gpus", str(g)]
                run = measure(name, size, flags, work, base, args.timeout)
                result["runs"].append(run)
                done()  # what ran so far, should a later size hang past every bound
                said = f"{run['wall_s']:.1f} s, exit {run['exit']}"
                print(f"ran: {name} at {size} ranks: {said}", flush=True)
        print(table(base, result["runs"]))
        return done()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"sweeps kept in {work}")


if __name__ == "__main__":
    sys.exit(main())
