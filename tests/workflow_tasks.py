# SPDX-License-Identifier: MIT
"""Task functions for the Workflow tests (importable: submitit pickles them by reference)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from mushin_box import ResumeContext


def quiet_trainer(max_epochs: int, **kwargs: Any) -> Any:
    """A 1-rank CPU Trainer that logs and prints nothing (tests add their callbacks)."""
    import pytorch_lightning as pl

    settings = dict(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    return pl.Trainer(max_epochs=max_epochs, **{**settings, **kwargs})


def grid_task(lr: float, seed: int = 0, fail_at: float = -1.0) -> dict[str, float]:
    if lr == fail_at and seed == 1:
        raise ValueError(f"planned failure at lr={lr}, seed={seed}")
    return {"loss": lr * (seed + 1), "neg": -lr}


def one_failed_sweep(root: Path) -> Path:
    """A real ``Workflow.run`` sweep of :func:`grid_task` at ``root``: ``lr`` x ``seed``,
    2 x 2, the cell lr=1.0,seed=1 failed (``on_error="nan"``)."""
    import warnings

    from hydra_zen import multirun

    from mushin_box import Workflow

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the failed cell's warning
        Workflow(grid_task).run(
            working_dir=root,
            on_error="nan",
            progress=False,
            lr=multirun([0.1, 1.0]),
            seed=multirun([0, 1]),
            fail_at=1.0,
        )
    return root


def marker_task(x: int, markers: str, sleep_s: float = 0.0) -> dict[str, int]:
    """Sleeps, then leaves one marker file per finished execution (the tests count them)."""
    time.sleep(sleep_s)
    Path(markers).mkdir(parents=True, exist_ok=True)
    (Path(markers) / f"x={x}.{uuid.uuid4().hex}.done").write_text(str(os.getpid()))
    return {"x2": 2 * x}


def marker_sweep(root: Path, markers: Path, resume: bool = False, **extra: Any) -> Any:
    """``Workflow(marker_task).run`` of ``x`` in 1..6 at ``root`` (the resume tests' sweep)."""
    from mushin_box import Workflow, multirun

    return Workflow(marker_task).run(
        working_dir=root,
        resume=resume,
        progress=False,
        x=multirun([1, 2, 3, 4, 5, 6]),
        markers=str(markers),
        **extra,
    )


def markers_ran(markers: Path) -> list[str]:
    """The cells :func:`marker_task` ran, once per run (``x=3``), sorted."""
    return sorted(p.name.split(".")[0] for p in markers.iterdir()) if markers.is_dir() else []


def resume_task(x: int, mushin_resume: ResumeContext) -> dict[str, float]:
    return {"attempt": float(mushin_resume.attempt), "x": float(x)}


def lightning_task(lr: float, max_epochs: int = 2) -> dict[str, float]:

    from mushin_box import MetricsCallback
    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = quiet_trainer(
        max_epochs,
        enable_checkpointing=False,
        callbacks=[MetricsCallback()],
    )
    trainer.fit(TinyModule(lr=lr), datamodule=TinyDataModule())
    return {"final_val_loss": float(trainer.callback_metrics["val_loss"])}


def _h(value: object) -> str:
    import hashlib

    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def secret_task(lr: float, api_token: str, db: dict, port_key: int = 0, out_dir: str = "") -> dict:
    """Checks (by hash, so its own records hold no secret) that the secrets arrived."""
    import json

    got = {
        "api_token": _h(api_token),
        "db.password": _h(db["password"]),
        "db.url": _h(db["url"]),
        "port_key": _h(port_key),
    }
    if out_dir:
        rank = os.environ.get("SLURM_PROCID", "0")
        Path(out_dir, f"lr={lr}_rank{rank}.json").write_text(json.dumps(got))
    if lr < 0:
        raise RuntimeError(f"the server rejected token {api_token}")
    return {"ok": float(got == json.loads(os.environ["MUSHIN_TEST_EXPECTED"]))}


def ddp_secret_task(trainer: object, module: object, datamodule: object) -> dict[str, float]:
    trainer.fit(module, datamodule=datamodule)  # type: ignore[attr-defined]
    return {"world_size": float(trainer.world_size)}  # type: ignore[attr-defined]


def checkpointed_task(max_epochs: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """A 1-rank fit that checkpoints into its cell and continues from mushin_resume."""
    import pytorch_lightning as pl

    from mushin_box.testing import TinyDataModule, TinyModule

    trainer = quiet_trainer(
        max_epochs,
        callbacks=[
            pl.callbacks.ModelCheckpoint(dirpath=mushin_resume.dir / "ckpt", save_last=True)
        ],
    )
    trainer.fit(TinyModule(), datamodule=TinyDataModule(), ckpt_path=mushin_resume.last_ckpt)
    return {"resumed": float(mushin_resume.last_ckpt is not None)}


def ckpt_probe_task(x: int, mushin_resume: ResumeContext) -> dict[str, float]:
    """Reports whether the attempt was handed a checkpoint to continue from."""
    return {"resumed": float(mushin_resume.last_ckpt is not None), "x": float(x)}


def token_task(api_token: str) -> dict[str, float]:
    """A required (MISSING) secret field: checks the value by hash."""
    return {"ok": float(_h(api_token) == os.environ["MUSHIN_TEST_TOKEN_HASH"])}


def hyper_task(key_dim: int, pad_token_id: int) -> dict[str, float]:
    return {"key_dim": float(key_dim), "pad": float(pad_token_id)}


def sleepy_task(x: int, sleep_at: int = -1, started: str = "") -> dict[str, int]:
    """Returns at once, except the first time the cell ``x == sleep_at`` runs: it says so in
    the file ``started``, then sleeps until it is stopped (a run resumed later returns)."""
    if x == sleep_at and not Path(started).exists():
        Path(started).write_text(str(os.getpid()))
        time.sleep(600)
    return {"x2": 2 * x}


def depth_task(lr: float, trainer: Any, module: Any) -> dict[str, float]:
    return {"val_loss": lr / trainer.max_epochs / module.depth}


def two_config_sweeps(root: Path) -> tuple[Path, Path]:
    """Two sweeps of ``depth_task`` that differ by values neither sweeps: ``a`` sweeps lr
    at 40 epochs and depth 2, ``b`` runs the default lr at 800 epochs and depth 3."""
    from hydra_zen import make_config

    from mushin_box import Workflow, multirun

    config = make_config(
        lr=0.1, trainer=make_config(max_epochs=40), module=make_config(depth=2, width=8)
    )
    wf = Workflow(depth_task, config)
    a, b = root / "a", root / "b"
    wf.run(working_dir=a, progress=False, lr=multirun([0.1, 0.01]))
    wf.run(working_dir=b, progress=False, **{"trainer.max_epochs": 800, "module.depth": 3})
    return a, b
