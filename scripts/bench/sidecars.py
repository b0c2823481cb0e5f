#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""Big sidecars against reading them, in fresh processes, interleaved:
``python sidecars.py KEYS JOBS REPEAT``.

* ``metrics``: ``mushin-box status`` of a sweep one of whose cells has a metrics file of
  ``KEYS`` keys (10**6: 20 MB, under the file's byte limit; past the key bound, so refused
  in one line, exit 2); ``metrics_floor``: a Python parsing that file (``json.loads``).
* ``jobs``: ``mushin-box cancel`` of a sweep whose jobs file names ``JOBS`` SLURM jobs, none
  of them queued any more (``squeue``, ``scancel`` and ``sacct`` stand-ins that answer
  nothing, on ``PATH``); ``jobs_floor``: a Python parsing that jobs file.

A cost quadratic in the file's keys or entries shows as a ratio in the hundreds; a linear
one stays a small multiple of the parse. Prints one JSON line of seconds:
``{"metrics": [...], "metrics_floor": [...], "jobs": [...], "jobs_floor": [...]}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mushin_box._core.sidecars import timestamp, write_json_atomic
from mushin_box._sweepdir.manifest import combo_id

BOX = str(Path(sys.executable).parent / "mushin-box")
PARSE = "import json, sys; json.loads(open(sys.argv[1], 'rb').read())"


def sweep(root: Path, combos: list[dict[str, int]], done: int) -> None:
    """A sweep of ``combos``, the first ``done`` of them completed cells (``a=1``, ...)."""
    entries = {}
    for combo in combos[:done]:
        name = ",".join(f"{k}={v}" for k, v in combo.items())
        record = {"attempt": 1, "cell": name, "combo": combo, "status": "completed"}
        write_json_atomic(root / name / "mushin_status.json", record)
        write_json_atomic(root / name / "mushin_metrics.json", {"loss": 1.0})
        entries[combo_id(combo)] = {**record, "dir": name}
    grid = {"a": [c["a"] for c in combos]}
    manifest = {"cells": entries, "grid": grid, "params": ["a"], "schema": 1}
    write_json_atomic(root / "mushin_sweep.json", manifest)


def build(base: Path, keys: int, jobs: int) -> tuple[Path, Path, Path]:
    """The two sweeps and the stand-ins' directory."""
    metrics, queued, tools = base / "metrics", base / "jobs", base / "bin"
    sweep(metrics, [{"a": 1}, {"a": 2}], 2)
    many = {f"m{i:07d}": float(i) for i in range(keys)}
    (metrics / "a=1" / "mushin_metrics.json").write_text(json.dumps(many))
    sweep(queued, [{"a": 1}, {"a": 2}], 1)
    submitted = [{"job_id": str(1000 + i)} for i in range(jobs)]
    record = {"schema": 1, "cluster": "slurm", "submitted": timestamp(), "jobs": submitted}
    write_json_atomic(queued / "mushin_jobs.json", record)
    tools.mkdir()
    for tool in ("squeue", "scancel", "sacct"):
        (tools / tool).write_text("#!/bin/sh\nexit 0\n")
        (tools / tool).chmod(0o755)
    return metrics, queued, tools


def seconds(argv: list[str], env: dict[str, str], ok: tuple[int, ...]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False)
    took = time.perf_counter() - start
    if done.returncode not in ok:
        tail = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{argv[1]}: exit {done.returncode}: {tail}")
    return took


def main() -> None:
    keys, jobs, repeat = (int(a) for a in sys.argv[1:4])
    out: dict[str, list[float]] = {"metrics": [], "metrics_floor": [], "jobs": [], "jobs_floor": []}
    with tempfile.TemporaryDirectory(prefix="mushin-bench-sidecars-") as tmp:
        metrics, queued, tools = build(Path(tmp), keys, jobs)
        env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
        python = sys.executable
        for _ in range(repeat):
            out["metrics"].append(seconds([BOX, "status", str(metrics)], env, (2,)))
            metrics_file = str(metrics / "a=1" / "mushin_metrics.json")
            out["metrics_floor"].append(seconds([python, "-c", PARSE, metrics_file], env, (0,)))
            out["jobs"].append(seconds([BOX, "cancel", str(queued)], env, (0,)))
            jobs_file = str(queued / "mushin_jobs.json")
            out["jobs_floor"].append(seconds([python, "-c", PARSE, jobs_file], env, (0,)))
            sweep(queued, [{"a": 1}, {"a": 2}], 1)  # cancel marked a=2 cancelled: undo it
    print(json.dumps(out))


if __name__ == "__main__":
    main()
