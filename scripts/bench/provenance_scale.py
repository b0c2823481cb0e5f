#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""Cost per rank of the topology + provenance record in a simulated 4,096-rank world.

Every rank of a world builds its :class:`~mushin_box._provenance.topology.Topology` from its own
environment (what the launch knows, and the rank's own row), the full provenance record and
writes it. Rank 0 gathering every rank's own row when the task ends is not timed here. This script
simulates SLURM's environment for a sample
of the ranks of a ``--nodes x --gpus-per-node`` world in one process and times, per rank:

* ``topology``: :func:`topology_from_env` on that rank's environment (with seeds);
* ``record``: :func:`full_provenance` on top of it, with what the rank wrapper's env file
  gives every rank (image identity, Apptainer version, rank command, the env file itself,
  read and redacted) -- the basic part (git, the installed package list) is built once
  per process and timed separately: it does not grow with the world;
* ``write``: :func:`write_provenance` (canonical JSON, fsync, atomic rename), and the
  package list beside it (``mushin_packages.txt``, also atomic: only rank 0 of a cell
  writes either, every simulated rank does here).

``--with-torch`` imports torch first, so the record also probes the devices (as a real
rank, which has imported torch, does; on a GPU machine this runs ``nvidia-smi`` once).

Ratios are against baselines run in the same process: the same steps for a 1-rank world,
and ``json.dumps`` of the same record. The target is <= 50 ms per rank; the script prints
the measured number (``--check`` exits 1 when it is over the target; tests never time).

    .venv/bin/python scripts/bench/provenance_scale.py            # 1024 nodes x 4 GPUs
    .venv/bin/python scripts/bench/provenance_scale.py --nodes 16 --sample 16
    .venv/bin/python scripts/bench/provenance_scale.py --with-torch
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mushin_box._core.layout import PACKAGES_FILE
from mushin_box._core.sidecars import canonical_dumps
from mushin_box._provenance.files import write_provenance
from mushin_box._provenance.full import full_provenance
from mushin_box._provenance.record import basic_provenance
from mushin_box._provenance.topology import topology_from_env
from mushin_box.testing import simulated_slurm_env

TARGET_MS = 50.0


def task(lr: float, seed: int = 0) -> dict[str, float]:
    """The benchmark's stand-in task (only its source location matters)."""
    return {"loss": lr}


CONFIG: dict[str, Any] = {
    "lr": 0.1,
    "seed": 1234,
    "model": {"_target_": "my.Model", "width": 512, "depth": 12},
    "trainer": {
        "_target_": "pytorch_lightning.Trainer",
        "devices": 4,
        "num_nodes": 1024,
        "max_epochs": 10,
        "precision": "bf16-mixed",
    },
    "data": {"root": "/datasets/x", "batch_size": 256},
}
FINGERPRINTS = {"config": "0" * 64, "code": "1" * 64}


def _ms(seconds: float) -> float:
    return seconds * 1e3


def launch_env(out: Path) -> dict[str, str]:
    """What the rank wrapper's env file gives every rank (and the env file itself)."""
    env_file = out / "apptainer-0123456789ab.env"
    lines = [f'{n}="${{{n}:?}}"' for n in ("SLURM_JOB_ID", "SLURM_PROCID", "SLURM_LOCALID")]
    lines += ["MASTER_PORT=29500", "NCCL_IB_HCA=mlx5", "WANDB_API_KEY=not-for-the-record"]
    env_file.parent.mkdir(parents=True, exist_ok=True)
    env_file.write_text("\n".join(["# mushin-box rank environment", *lines * 10]) + "\n")
    return {
        "MUSHIN_SIF_SHA256": "a" * 64,
        "MUSHIN_SIF_UUID": "5b2b8c4e-0000-4000-8000-000000000001",
        "MUSHIN_IMAGE_DEFINITION_SHA256": "d" * 64,
        "MUSHIN_IMAGE_BASE_DIGEST": "sha256:" + "b" * 64,
        "MUSHIN_APPTAINER_VERSION": "1.3.4",
        "MUSHIN_RANK_COMMAND": f"apptainer exec --nv --cleanenv --env-file {env_file} "
        "--bind /p:/p --pwd /p /images/train.sif python",
        "MUSHIN_ENV_FILE": str(env_file),
    }


def one_rank(
    nodes: int, gpus: int, rank: int, basic: dict[str, Any], out: Path, launch: dict[str, str]
) -> tuple[dict[str, float], dict[str, Any]]:
    """Time the three steps for one simulated rank; return (ms per step, record)."""
    world = nodes * gpus
    env = {**simulated_slurm_env(nodes, gpus, rank), **launch}
    seeds = {r: 1234 + r for r in range(world)}
    gc.collect()  # a rank builds one record in a fresh process: no garbage from the last one
    t0 = time.perf_counter()
    topo = topology_from_env(env).with_seeds(seeds)
    t1 = time.perf_counter()
    cfg = {**CONFIG, "trainer": {**CONFIG["trainer"], "devices": gpus, "num_nodes": nodes}}
    record = full_provenance(
        task=task,
        config=cfg,
        fingerprints=FINGERPRINTS,
        seed_base=1234,
        topology=topo,
        environ=env,
        base=basic,
    )
    t2 = time.perf_counter()
    write_provenance(out / f"rank{rank}", record)
    t3 = time.perf_counter()
    times = {"topology": _ms(t1 - t0), "record": _ms(t2 - t1), "write": _ms(t3 - t2)}
    times["total"] = times["topology"] + times["record"] + times["write"]
    return times, record


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _time(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return _ms(best)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--sample", type=int, default=64, help="ranks timed (evenly spaced)")
    parser.add_argument("--check", action="store_true", help=f"exit 1 above {TARGET_MS} ms")
    parser.add_argument(
        "--with-torch", action="store_true", help="import torch first: devices are probed"
    )
    args = parser.parse_args(argv)
    if args.with_torch:
        import torch  # noqa: F401  (provenance probes devices only when torch is imported)
    nodes, gpus = args.nodes, args.gpus_per_node
    world = nodes * gpus
    sample = sorted({round(i * (world - 1) / max(args.sample - 1, 1)) for i in range(args.sample)})

    t0 = time.perf_counter()
    basic = basic_provenance(task=task, config=CONFIG, fingerprints=FINGERPRINTS, seed_base=1234)
    basic_ms = _ms(time.perf_counter() - t0)

    with tempfile.TemporaryDirectory(prefix="mushin-bench-") as tmp:
        out = Path(tmp)
        launch = launch_env(out / "work")
        one_rank(nodes, gpus, 0, basic, out, launch)  # warm-up (imports, caches)
        rows: list[dict[str, float]] = []
        record: dict[str, Any] = {}
        for rank in sample:
            times, record = one_rank(nodes, gpus, rank, basic, out, launch)
            rows.append(times)
        baseline = [one_rank(1, 1, 0, basic, out / "base", launch)[0] for _ in range(len(sample))]
        size = len(canonical_dumps(record))
        packages = (out / f"rank{sample[-1]}" / PACKAGES_FILE).stat().st_size

    dumps_ms = _time(lambda: json.dumps(record), 5)
    canonical_ms = _time(lambda: canonical_dumps(record), 5)
    per_rank = _median(rows, "total")
    one = _median(baseline, "total")

    fastest = min(r["total"] for r in rows)
    verdict = "OK" if per_rank <= TARGET_MS else "OVER TARGET"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        f"world: {nodes} nodes x {gpus} GPUs = {world} ranks; {len(sample)} ranks timed "
        f"(load average {load:.1f} on {os.cpu_count()} CPUs)",
        f"record size: {size / 1024:.0f} KiB per rank ({size / world:.0f} B per rank row); "
        f"{PACKAGES_FILE}: {packages / 1024:.1f} KiB",
        f"basic part (git + installed package list, once per process): {basic_ms:.1f} ms",
        f"devices probed: {'yes' if record['run'].get('devices') else 'no (torch not imported)'}",
        "",
        f"{'step':<10}{'median ms':>11}{'min ms':>9}{'max ms':>9}{'1-rank ms':>11}{'x 1-rank':>10}",
    ]
    for key in ("topology", "record", "write", "total"):
        med, base = _median(rows, key), _median(baseline, key)
        low, high = min(r[key] for r in rows), max(r[key] for r in rows)
        lines.append(
            f"{key:<10}{med:>11.2f}{low:>9.2f}{high:>9.2f}{base:>11.2f}{med / base:>10.1f}"
        )
    lines += [
        "",
        f"json.dumps of the same record:      {dumps_ms:.2f} ms "
        f"(per-rank total = {per_rank / dumps_ms:.1f}x json.dumps)",
        f"canonical_dumps of the same record: {canonical_ms:.2f} ms",
        "",
        f"per-rank provenance cost: {per_rank:.1f} ms median, {fastest:.1f} ms best "
        f"(target <= {TARGET_MS:.0f} ms): {verdict}",
        f"  with the basic part rebuilt per rank: {per_rank + basic_ms:.1f} ms",
        f"  vs a 1-rank world: {per_rank / one:.1f}x ({one:.2f} ms)",
        f"  one record describing the whole world (what rank 0 of a cell writes): "
        f"{per_rank * 1e3 / world:.1f} us per rank described",
    ]
    print("\n".join(lines))
    return 1 if args.check and per_rank > TARGET_MS else 0


if __name__ == "__main__":
    sys.exit(main())
