# SPDX-License-Identifier: MIT
"""Entry point of the ranks HydraDDP starts: ``python -m mushin_box._train.ddp_child``.
Rebuilds rank 0's job from what rank 0 wrote down (the saved Hydra config, restored as the
current one so ``${hydra:...}`` resolves alike; cwd, sys.path, seed base, entry point,
``ckpt_path``); it runs no Hydra app and no cell code, so it records where it runs itself
(:func:`~mushin_box._provenance.ranks.write_rank_runtime`) before it says it is joining.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

from mushin_box._core.layout import DDP_PARENT_PID_ENV, DDP_SPEC_ENV
from mushin_box._provenance.ranks import write_rank_runtime
from mushin_box._train.ranks import set_ready_fd
from mushin_box._train.resume import current_attempt
from mushin_box._train.seeding import global_rank_from_env, seed_everything_per_rank


def _watch_parent(parent_pid: int) -> None:
    """Exit when rank 0 is gone (backs up PR_SET_PDEATHSIG, e.g. on non-Linux hosts)."""
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def _load_main(path: str) -> None:
    """Make rank 0's ``__main__`` importable, as multiprocessing's spawn does."""
    namespace = runpy.run_path(path, run_name="__mp_main__")
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(namespace)
    module.__file__ = path
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


def _restore_hydra_config(config_dir: Path) -> Any:
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.utils import setup_globals
    from omegaconf import OmegaConf

    setup_globals()  # registers the ${hydra:...} and ${now:...} resolvers
    cfg = OmegaConf.load(config_dir / "config.yaml")
    hydra_file = config_dir / "hydra.yaml"
    if hydra_file.is_file():
        # rank 0's saved Hydra node, as is: HydraConfig.set_config wants the structured
        # schema, which the saved YAML (with plugin-specific keys) need not fit
        saved = OmegaConf.create({"hydra": OmegaConf.load(hydra_file).hydra})
        OmegaConf.set_readonly(saved, True)
        HydraConfig.instance().cfg = saved  # type: ignore[assignment]
    return cfg


def main() -> None:
    spec: dict[str, Any] = json.loads(os.environ[DDP_SPEC_ENV])
    threading.Thread(
        target=_watch_parent,
        args=(int(os.environ[DDP_PARENT_PID_ENV]),),
        daemon=True,
        name="mushin-parent-watch",
    ).start()
    set_ready_fd(spec.get("ready_fd"))  # HydraDDP says "joining" on it (ranks.say_ready)
    for entry in reversed(spec["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    os.chdir(spec["cwd"])
    attempt = current_attempt(spec["job_dir"])  # None: no attempt counted, no cell to record
    if attempt is not None:
        write_rank_runtime(Path(spec["job_dir"]), rank=global_rank_from_env(), attempt=attempt)
    if spec.get("main_file"):
        _load_main(spec["main_file"])

    cfg = _restore_hydra_config(Path(spec["config_dir"]))
    if spec.get("seed_base") is not None:
        seed_everything_per_rank(int(spec["seed_base"]), workers=bool(spec.get("seed_workers")))

    from hydra_zen import instantiate

    trainer = instantiate(cfg.trainer)
    module = instantiate(cfg.module)
    datamodule = instantiate(cfg.datamodule) if "datamodule" in cfg else None
    # one line per trainer call of rank 0; EOF when rank 0's job is over
    for line in filter(str.strip, sys.stdin):
        call: dict[str, Any] = json.loads(line)
        kwargs = {"datamodule": datamodule, "ckpt_path": call["ckpt_path"]}
        if call.get("weights_only") is not None:
            kwargs["weights_only"] = call["weights_only"]
        getattr(trainer, call["stage"])(module, **kwargs)


if __name__ == "__main__":
    main()
