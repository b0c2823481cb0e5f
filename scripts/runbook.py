# SPDX-License-Identifier: MIT
"""The multi-node runbook (steps 1-5, listed in docs/multi-node.md) against a SLURM cluster.

Run through ``scripts/runbook``. Prints PASS/FAIL per check and exits non-zero on any
failure. Two modes:

- the local cluster (default; ``scripts/runbook`` starts it): the GPUs are the local
  cluster's fake GPUs (count GRES), the same ``--gpus-per-node`` request is scheduled, and
  the ranks train on CPU with the gloo backend, as the output says; the work directory
  defaults to a fresh one under ``/tmp`` (the local "nodes" share this machine's disk).
- ``--cluster``: the cluster this login node submits to. Nothing local is started; the
  controller must answer (``scontrol ping``) or the runbook stops at once (exit 2);
  ``--workdir`` is required, because every compute node must see it (a node-local path such
  as ``/tmp`` gets a warning), and the ranks train on ``--accelerator gpu`` unless told
  otherwise.

Step 4 runs twice: through ``Workflow.run(launcher="submitit_slurm")``, and as the seed
writes it, a hydra-zen app launched from the command line with ``--multirun`` and
``hydra/launcher=submitit_slurm`` (this file is that app when its first argument is
``app``: ``python runbook.py app --multirun hydra/launcher=submitit_slurm seed=1,2 ...``).
Step 5 checks and loads both sweeps.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
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


def runbook_config(accelerator: str = "cpu", devices: int = 1, num_nodes: int = 1) -> Any:
    """The task's config (step 3): the Trainer with devices/num_nodes and HydraDDP."""
    import pytorch_lightning as pl
    from hydra_zen import builds, make_config

    from mushin_box import HydraDDP, MetricsCallback
    from mushin_box.testing import TinyDataModule, TinyModule

    return make_config(
        seed=1234,
        trainer=builds(
            pl.Trainer,
            accelerator=accelerator,
            devices=devices,
            num_nodes=num_nodes,
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


def app() -> None:
    """The hydra-zen app of step 4's command-line form (``runbook.py app <hydra args>``)."""
    from hydra_zen import store, zen

    store(runbook_config(), name="runbook")
    store.add_to_hydra_store()
    zen(train).hydra_main(config_name="runbook", config_path=None, version_base="1.3")


def job_dirs(root: Path) -> list[Path]:
    """A sweep's job directories: Workflow.run's cells, or Hydra's numbered jobs."""
    return sorted(
        d
        for d in root.iterdir()
        if (d / "mushin_status.json").exists() or (d / ".hydra" / "overrides.yaml").exists()
    )


def _cluster_refusal(workdir: str | None) -> str | None:
    """Why ``--cluster`` can't start (one line naming the fix), or None; warns about a
    work directory that compute nodes probably can't see."""
    from mushin_box._launch.review import node_local_root
    from mushin_box._slurm.probe import probe_slurm

    if not workdir:
        return (
            "--cluster needs --workdir DIR on storage every compute node sees "
            "(e.g. --workdir /scratch/$USER/runbook)"
        )
    probe = probe_slurm()
    if not probe.reachable:
        return (
            f"no SLURM controller answers ({probe.reason}); run it on a login node, "
            "or drop --cluster to use the local test cluster"
        )
    root = node_local_root(str(Path(workdir).resolve()))
    if root is not None:
        print(
            f"runbook: warning: {workdir} is under {root}, which is node-local on most "
            "clusters: compute nodes may not see it",
            file=sys.stderr,
        )
    return None


def main() -> int:
    if sys.argv[1:2] == ["app"]:
        del sys.argv[1]  # the rest is Hydra's command line
        app()
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus-per-node", type=int, default=2)
    parser.add_argument("--partition", default=None)
    parser.add_argument("--account", default=None)
    parser.add_argument("--launcher", default="submitit_slurm")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run on the cluster this machine submits to (needs --workdir on shared storage); "
        "default: the local test cluster",
    )
    parser.add_argument(
        "--accelerator",
        default=None,
        help="'gpu' or 'cpu' (default: gpu with --cluster, else cpu with gloo)",
    )
    parser.add_argument(
        "--workdir", default=None, help="where the sweeps go (with --cluster: shared storage)"
    )
    parser.add_argument("-v", action="store_true", help="print tracebacks of failed checks")
    args = parser.parse_args()
    if args.cluster:
        refusal = _cluster_refusal(args.workdir)
        if refusal:
            print(f"runbook: error: {refusal}", file=sys.stderr)
            return 2
    args.accelerator = args.accelerator or ("gpu" if args.cluster else "cpu")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="mushin-runbook-"))
    workdir.mkdir(parents=True, exist_ok=True)
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
        state["config"] = runbook_config(args.accelerator, gpus, nodes)
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

    def step4_raw() -> str:
        # the seed's words: hydra/launcher=submitit_slurm plus hydra.launcher.<key>=<value>
        # per field, and --multirun; no Workflow.run
        launcher = [f"hydra.launcher.{key}={value}" for key, value in state["slurm"].items()]
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "app",
            "--multirun",
            f"hydra.sweep.dir={workdir / 'raw'}",
            f"hydra/launcher={args.launcher}",
            *launcher,
            f"trainer.accelerator={args.accelerator}",
            f"trainer.devices={gpus}",
            f"trainer.num_nodes={nodes}",
            "seed=1,2",
        ]
        ranks = workdir / "raw-ranks"  # TinyModule: each rank writes a line per epoch there
        ranks.mkdir(exist_ok=True)
        env = {**os.environ, "MUSHIN_TEST_RANK_LOG": str(ranks)}
        proc = subprocess.run(
            command, cwd=workdir, env=env, capture_output=True, text=True, timeout=420
        )
        if proc.returncode != 0:
            raise RuntimeError(f"exit {proc.returncode}: {(proc.stdout + proc.stderr)[-1500:]}")
        return f"--multirun hydra/launcher={args.launcher} seed=1,2: 2 jobs ran, exit 0"

    def step5a() -> str:
        counts = {
            f"{sweep}/{d.name}": len(list(d.rglob("fit_metrics.pt")))
            for sweep in state["sweeps"]
            for d in job_dirs(workdir / sweep)
        }
        if sorted(counts.values()) != [1] * 2 * len(state["sweeps"]):
            raise AssertionError(f"fit_metrics.pt per job dir: {counts}")
        return f"fit_metrics.pt exactly once per job dir {sorted(counts)}"

    def step5b() -> str:
        from mushin_box import load_experiment

        ds = load_experiment(workdir / "sweep")
        world = ds["world_size"].values.tolist()
        if world != [nodes * gpus] * 2 or "fit.val_loss" not in ds:
            raise AssertionError(f"world sizes {world}, variables {list(ds.data_vars)}")
        return f"load_experiment: dims {dict(ds.sizes)}, world size {world[0]} in both cells"

    def step5b_raw() -> str:
        from mushin_box import load_experiment

        ds = load_experiment(workdir / "raw")
        seeds = ds["seed"].values.tolist() if "seed" in ds.coords else None
        if seeds != [1, 2] or ds["fit.val_loss"].dims != ("seed", "epoch"):
            raise AssertionError(f"coordinates {dict(ds.coords)}, variables {list(ds.data_vars)}")
        if bool(ds["fit.val_loss"].isnull().any()):
            raise AssertionError(f"missing epochs: {ds['fit.val_loss'].values.tolist()}")
        # which ranks trained each job, and in which world (TinyModule's rank records)
        seen: dict[str, set[tuple[str, str]]] = {}
        for log in (workdir / "raw-ranks").glob("rank*.log"):
            for line in log.read_text().splitlines():
                fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
                seen.setdefault(fields["job"], set()).add((log.stem, fields["world"]))
        want = {(f"rank{r}", str(nodes * gpus)) for r in range(nodes * gpus)}
        if seen != {"0": want, "1": want}:
            raise AssertionError(f"ranks (and world sizes) per job: {seen}")
        return (
            f"load_experiment: dims {dict(ds.sizes)}; {nodes * gpus} ranks in a world of "
            f"{nodes * gpus} trained each job"
        )

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
    state["sweeps"] = []
    if ok and check("4a. Workflow.run multirun on SLURM", step4):
        state["sweeps"].append("sweep")
    if ok and check("4b. --multirun hydra/launcher=submitit_slurm", step4_raw):
        state["sweeps"].append("raw")
    if state["sweeps"]:
        check("5a. fit_metrics.pt once per job dir", step5a)
    if "sweep" in state["sweeps"]:
        check("5b. load_experiment aggregates the Workflow.run sweep", step5b)
    if "raw" in state["sweeps"]:
        check("5b. load_experiment aggregates the --multirun sweep", step5b_raw)
    if ok:
        check("5c. mismatched tasks_per_node fails fast", step5c)
    failed = [name for name, good, _ in RESULTS if not good]
    print(f"\nrunbook: {len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
