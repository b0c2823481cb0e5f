# SPDX-License-Identifier: MIT
"""The multi-node runbook (steps 1-5, listed in docs/multi-node.md) against a SLURM cluster.

Run through ``scripts/runbook`` (which starts the local cluster). Prints PASS/FAIL per
check and exits non-zero on any failure. The runbook's GPUs are the local cluster's fake
GPUs (count GRES): the same ``--gpus-per-node`` request is scheduled, and the ranks train
on CPU with the gloo backend. That is said in the output, once per affected step.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS: list[tuple[str, bool, str]] = []


def check(name: str, fn: Callable[[], str]) -> bool:
    start = time.monotonic()
    try:
        detail = fn()
        ok = True
    except Exception as exc:  # a failed check is reported, the others still run
        detail = f"{type(exc).__name__}: {str(exc)[:400]}"
        if "-v" in sys.argv:
            traceback.print_exc()
        ok = False
    took = time.monotonic() - start
    RESULTS.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}  ({took:.1f}s)  {detail}", flush=True)
    return ok


def train(seed: int, trainer: Any, module: Any, datamodule: Any) -> dict[str, float]:
    from mushin_box import seed_everything_per_rank

    seed_everything_per_rank(seed)
    trainer.fit(module, datamodule=datamodule)
    return {"world_size": float(trainer.world_size)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    parser.add_argument("--partition", default=None)
    parser.add_argument("--account", default=None)
    parser.add_argument("--launcher", default="submitit_slurm")
    parser.add_argument(
        "--accelerator", default="cpu", help="'gpu' on a real GPU cluster (default: cpu, gloo)"
    )
    parser.add_argument("--workdir", default=None)
    parser.add_argument("-v", action="store_true", help="print tracebacks of failed checks")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mushin-runbook-"))
    gpus, nodes = args.gpus_per_node, args.nodes
    print(
        f"runbook: {nodes} node(s) x {gpus} GPU(s) per node, launcher {args.launcher}, "
        f"work dir {workdir}"
    )
    if args.accelerator == "cpu":
        print("runbook: ranks run on CPU with gloo (on the local cluster the GPUs are fake)")

    state: dict[str, Any] = {}

    def step1() -> str:
        if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") is None:
            raise RuntimeError("hydra-submitit-launcher is not installed: pip install it")
        from hydra.core.plugins import Plugins
        from hydra.plugins.launcher import Launcher

        names = {p.__name__ for p in Plugins.instance().discover(Launcher)}
        if "SlurmLauncher" not in names:
            raise RuntimeError(f"Hydra does not discover the SLURM launcher (found {names})")
        return "hydra-submitit-launcher installed and discovered by Hydra"

    def step2() -> str:
        from mushin_box import submitit_slurm_config

        slurm = submitit_slurm_config(
            nodes=nodes,
            gpus_per_node=gpus,
            partition=args.partition,
            account=args.account,
            timeout_min=10,
        )
        if slurm["tasks_per_node"] != gpus:
            raise AssertionError(f"tasks_per_node {slurm['tasks_per_node']} != {gpus}")
        state["slurm"] = slurm
        return f"tasks_per_node={slurm['tasks_per_node']} derived from gpus_per_node={gpus}"

    def step3() -> str:
        import pytorch_lightning as pl
        from hydra_zen import builds, make_config

        from mushin_box import HydraDDP, MetricsCallback
        from mushin_box.testing import TinyDataModule, TinyModule

        state["config"] = make_config(
            seed=1234,
            trainer=builds(
                pl.Trainer,
                accelerator=args.accelerator,
                devices=gpus,
                num_nodes=nodes,
                max_epochs=2,
                strategy=builds(HydraDDP),
                callbacks=[builds(MetricsCallback)],
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
            ),
            module=builds(TinyModule),
            datamodule=builds(TinyDataModule),
        )
        return (
            f"Trainer devices={gpus} num_nodes={nodes} strategy=HydraDDP "
            f"(accelerator={args.accelerator})"
        )

    def step4() -> str:
        from mushin_box import Workflow, multirun

        ds = Workflow(train, state["config"]).run(
            working_dir=workdir / "sweep",
            launcher=args.launcher,
            launcher_config=state["slurm"],
            progress=False,
            seed=multirun([1, 2]),
        )
        state["ds"] = ds
        statuses = ds["status"].values.tolist()
        if statuses != ["completed", "completed"]:
            raise AssertionError(f"cell statuses {statuses}; failures: {ds.attrs['failures']}")
        return f"2 cells completed on {nodes * gpus} ranks each, multirun via {args.launcher}"

    def step5a() -> str:
        root = workdir / "sweep"
        counts = {
            d.name: len(list(d.rglob("fit_metrics.pt")))
            for d in root.iterdir()
            if (d / "mushin_status.json").exists()
        }
        if sorted(counts.values()) != [1, 1]:
            raise AssertionError(f"fit_metrics.pt per job dir: {counts}")
        return f"fit_metrics.pt exactly once per job dir {sorted(counts)}"

    def step5b() -> str:
        from mushin_box import load_experiment

        ds = load_experiment(workdir / "sweep")
        world = ds["world_size"].values.tolist()
        if world != [nodes * gpus] * 2 or "fit.val_loss" not in ds:
            raise AssertionError(f"world sizes {world}, variables {list(ds.data_vars)}")
        return f"load_experiment: dims {dict(ds.sizes)}, world size {world[0]} in both cells"

    def step5c() -> str:
        from mushin_box import Workflow, multirun

        bad = {**state["slurm"], "tasks_per_node": max(1, gpus - 1)}
        start = time.monotonic()
        try:
            Workflow(train, state["config"]).run(
                working_dir=workdir / "mismatch",
                launcher=args.launcher,
                launcher_config=bad,
                progress=False,
                seed=multirun([1]),
            )
        except Exception as exc:
            took = time.monotonic() - start
            if "DDP world size mismatch" not in str(exc):
                raise AssertionError(f"failed, but not with the world-size error: {exc}") from exc
            return (
                f"tasks_per_node={bad['tasks_per_node']} raised the world-size error in {took:.0f}s"
            )
        raise AssertionError("a mismatched tasks_per_node did not fail")

    check("1. launcher plugin installed", step1)
    ok = check("2. submitit_slurm_config", step2)
    ok = check("3. Trainer devices/num_nodes/HydraDDP", step3) and ok
    if ok and check("4. multirun on SLURM", step4):
        check("5a. fit_metrics.pt once per job dir", step5a)
        check("5b. load_experiment aggregates", step5b)
    if ok:
        check("5c. mismatched tasks_per_node fails fast", step5c)
    failed = [name for name, good, _ in RESULTS if not good]
    print(f"\nrunbook: {len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
