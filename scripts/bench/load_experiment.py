#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""``load_experiment`` over a 1,000-cell sweep: mushin-box against torch-pickle readers.

A synthetic finished sweep is written (what ``Workflow.run`` leaves per cell: status,
metrics and provenance sidecars, ``.hydra/config.yaml`` and ``overrides.yaml``,
``fit_metrics.pt`` and its ``fit_metrics.json`` twin), then read by:

* ``mushin-box``: ``mushin_box.load_experiment`` (reads the JSON twins, imports no torch);
* ``mushin-box .pt``: the same, with the JSON twins removed (a sweep written before them:
  the series come from the ``.pt`` files, through torch);
* ``torch.load``: the bare loop ``torch.load(f, weights_only=True)`` over every
  ``fit_metrics.pt`` (a lower bound for any reader of the pickles: no grid, no Dataset);
* ``mushin-py``: ``mushin.load_experiment`` of mushin-py, when ``--mushin-py-python`` names a
  Python that has it (``python -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install
  mushin-py``); it returns a list of per-job records (config, ``.pt`` files, checkpoints),
  not a gridded Dataset.

Each reader runs in a fresh process, so *cold* is what a look from a login node costs
(imports included: torch alone is seconds), and *warm* is a second call in that process.
Times are the median of ``--repeat`` processes.

    .venv/bin/python scripts/bench/load_experiment.py                  # 1,000 cells
    .venv/bin/python scripts/bench/load_experiment.py --cells 100 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROBE = """
import sys, time, json
t0 = time.perf_counter()
{body}
t1 = time.perf_counter()
{call}
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
print(json.dumps({{"cold": t2 - t0, "warm": t3 - t2, "torch": "torch" in sys.modules,
                  "n": {count}}}))
"""
READERS = {
    "mushin-box": (
        "from mushin_box import load_experiment",
        "out = load_experiment(sys.argv[1])",
        "int(out['status'].size)",
    ),
    "torch.load": (
        "import torch\nfrom pathlib import Path",
        "out = [torch.load(p, weights_only=True) for p in "
        "sorted(Path(sys.argv[1]).glob('*/fit_metrics.pt'))]",
        "len(out)",
    ),
    "mushin-py": (
        "from mushin import load_experiment",
        "out = load_experiment(sys.argv[1])",
        "len(out)",
    ),
}


def build_sweep(root: Path, cells: int, epochs: int, metrics: int) -> None:
    """Write a finished ``cells``-cell sweep (grid lr x seed) with ``epochs``-long series."""
    import math

    import torch

    from mushin_box._core.sidecars import canonical_dumps, write_json_atomic
    from mushin_box._sweepdir.manifest import combo_id

    seeds = 10 if cells >= 10 else 1
    lrs = math.ceil(cells / seeds)
    grid = {"lr": [round(0.001 * (i + 1), 6) for i in range(lrs)], "seed": list(range(seeds))}
    manifest_cells = {}
    n = 0
    for lr in grid["lr"]:
        for seed in grid["seed"]:
            if n == cells:
                break
            n += 1
            combo = {"lr": lr, "seed": seed}
            name = f"lr={lr},seed={seed}"
            cell = root / name
            (cell / ".hydra").mkdir(parents=True)
            (cell / ".hydra" / "config.yaml").write_text(
                f"lr: {lr}\nseed: {seed}\nmax_epochs: {epochs}\n"
            )
            (cell / ".hydra" / "overrides.yaml").write_text(f"- lr={lr}\n- seed={seed}\n")
            series: dict[str, list[float]] = {"epoch": list(range(epochs))}
            for m in range(metrics):
                series[f"metric{m}"] = [lr * (m + 1) / (e + 1) + seed for e in range(epochs)]
            torch.save(series, cell / "fit_metrics.pt")
            (cell / "fit_metrics.json").write_bytes(canonical_dumps(series))
            final = {k: v[-1] for k, v in series.items() if k != "epoch"}
            write_json_atomic(cell / "mushin_metrics.json", final)
            write_json_atomic(
                cell / "mushin_provenance.json",
                {
                    "reproducibility": {"config": {**combo, "max_epochs": epochs}},
                    "run": {"host": "node1", "pid": 1},
                    "schema": 3,
                },
            )
            write_json_atomic(
                cell / "mushin_status.json",
                {"attempt": 1, "cell": name, "combo": combo, "status": "completed"},
            )
            manifest_cells[combo_id(combo)] = {
                "attempt": 1,
                "combo": combo,
                "dir": name,
                "status": "completed",
            }
    write_json_atomic(
        root / "mushin_sweep.json",
        {"cells": manifest_cells, "grid": grid, "params": list(grid), "schema": 1},
    )


def run_once(python: str, reader: str, root: Path) -> dict[str, Any]:
    """One fresh process of ``reader`` on ``root``: its cold and warm times."""
    imports, call, count = READERS[reader]
    code = PROBE.format(body=imports, call=call, count=count)
    out = subprocess.run([python, "-c", code, str(root)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        return {"error": errors[0]}
    return {
        "cold_s": statistics.median(r["cold"] for r in runs),
        "warm_s": statistics.median(r["warm"] for r in runs),
        "imports_torch": runs[0]["torch"],
        "items": runs[0]["n"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--metrics", type=int, default=4, help="series per cell")
    parser.add_argument("--repeat", type=int, default=3, help="processes per reader")
    parser.add_argument(
        "--mushin-py-python",
        default="/tmp/bench-venv/bin/python",
        help="a Python with mushin-py installed (skipped when it has none)",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-load-experiment-"))
    try:
        sweep = work / "sweep"
        sweep.mkdir()
        build_sweep(sweep, args.cells, args.epochs, args.metrics)
        bare = work / "sweep-pt"  # the same sweep, written before the JSON twins existed
        shutil.copytree(sweep, bare)
        for twin in bare.glob("*/fit_metrics.json"):
            twin.unlink()
        plan = {
            "mushin-box": (sys.executable, "mushin-box", sweep),
            "mushin-box .pt": (sys.executable, "mushin-box", bare),
            "torch.load": (sys.executable, "torch.load", sweep),
        }
        if Path(args.mushin_py_python).exists():
            plan["mushin-py"] = (args.mushin_py_python, "mushin-py", sweep)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in plan}
        load = os.getloadavg()[0]
        for _ in range(args.repeat):  # interleaved: a busy spell hits every reader alike
            for name, (python, reader, root) in plan.items():
                runs[name].append(run_once(python, reader, root))
        results = {name: summarize(r) for name, r in runs.items()}
        if "mushin-py" not in results:
            results["mushin-py"] = {"error": f"{args.mushin_py_python} not found"}
        load = max(load, os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"load_experiment over {args.cells} cells x {args.metrics} series x {args.epochs} "
        f"epochs (median of {args.repeat} processes; load average up to {load:.1f} on "
        f"{os.cpu_count()} CPUs)"
    )
    print(f"{'reader':<16} {'cold s':>8} {'warm s':>8}  torch  items")
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<16} {'-':>8} {'-':>8}  {r['error']}")
            continue
        print(
            f"{name:<16} {r['cold_s']:8.2f} {r['warm_s']:8.2f}  "
            f"{'yes' if r['imports_torch'] else 'no':<5}  {r['items']}"
        )
    ours, theirs = results["mushin-box"], results["mushin-py"]
    if "error" not in ours and "error" not in theirs:
        ratio = float(ours["cold_s"]) / float(theirs["cold_s"])
        print(f"mushin-box / mushin-py (cold): {ratio:.2f}x (goal <= 0.5x)")
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
