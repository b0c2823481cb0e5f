#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""The 2-rank CPU fit of ``ddp_fit.py`` started three ways, each timed as a whole process.

    torchrun_fit.py EPOCHS REPEAT    # prints {"torchrun": [s...], "hydraddp": [...], "ddp": [...]}

- ``torchrun``: ``python -m torch.distributed.run --standalone --nproc-per-node 2`` of this
  script's worker: two workers, each running the Hydra job whose trainer uses
  ``mushin_box.HydraDDP``, which sees torchrun's environment and starts no rank (what each
  worker of ``mushin-box launch --torchrun`` does inside a cell);
- ``hydraddp``: ``ddp_fit.py box``: one process, HydraDDP starts the second rank;
- ``ddp``: ``ddp_fit.py lightning``: Lightning's ``strategy="ddp"``, re-running the script.

Why whole processes: what torchrun adds is processes (its agent, with its own torch import,
and a rendezvous store), so the clock must cover every interpreter's start and imports, not
only the fit inside rank 0 as ``ddp_fit.py`` times it. The three take turns, so that a noisy
spell of a shared machine hits them all. A path that fails is reported with an empty list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _worker(epochs: int, job: Path) -> None:
    """One torchrun worker: the Hydra job of ``ddp_fit.py``'s ``box`` fit, in its own dir."""
    sys.path.insert(0, str(HERE))
    import ddp_fit  # type: ignore[import-not-found]

    ddp_fit._hydra("box", epochs, job / f"rank{os.environ.get('RANK', '0')}")


def commands(python: str, epochs: int, job: Path) -> dict[str, list[str]]:
    """Each path's command line."""
    torchrun = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    return {
        "torchrun": [*torchrun, str(Path(__file__)), "worker", str(epochs), str(job)],
        "hydraddp": [python, str(HERE / "ddp_fit.py"), "box", str(epochs)],
        "ddp": [python, str(HERE / "ddp_fit.py"), "lightning", str(epochs)],
    }


def main() -> None:
    if sys.argv[1] == "worker":
        _worker(int(sys.argv[2]), Path(sys.argv[3]))
        return
    epochs, repeat = int(sys.argv[1]), int(sys.argv[2])
    out: dict[str, list[float]] = {"torchrun": [], "hydraddp": [], "ddp": []}
    broken: set[str] = set()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    # as mushin-box's torchrun agent: no rendezvous store shared across restarts
    env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    with tempfile.TemporaryDirectory(prefix="mushin-bench-torchrun-") as tmp:
        for i in range(repeat):
            for name, argv in commands(sys.executable, epochs, Path(tmp) / f"job{i}").items():
                if name in broken:
                    continue
                t0 = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp)
                seconds = time.perf_counter() - t0
                if done.returncode != 0:
                    tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{name} fit not run: {tail}", file=sys.stderr)
                    broken.add(name)
                    out[name] = []
                    continue
                out[name].append(seconds)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
