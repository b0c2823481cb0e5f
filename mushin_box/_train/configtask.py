# SPDX-License-Identifier: MIT
"""The task of a config-only experiment (``mushin-box launch exp.py``): every cell runs
:func:`fit_task` (fit, then report), with :func:`seed_pre_call` as zen's ``pre_call``.
Provenance records them and submitted jobs pickle them, so their names are stable
(:func:`~mushin_box._core.targets.public`) wherever this module moves.

Examples
--------
>>> fit_task.__module__, seed_pre_call.__qualname__
('mushin_box', 'seed_pre_call')
"""

from __future__ import annotations

from typing import Any

from mushin_box._core.targets import public
from mushin_box._train.resume import ResumeContext
from mushin_box._train.seeding import seed_everything_per_rank


@public
def seed_pre_call(cfg: Any) -> None:
    """zen ``pre_call`` of a config-only experiment: seed every rank from ``cfg.seed``
    before the model is built (``seed_everything_per_rank``), when the config has one."""
    seed = cfg.get("seed") if hasattr(cfg, "get") else getattr(cfg, "seed", None)
    if seed is not None:
        seed_everything_per_rank(int(seed))


@public
def fit_task(
    trainer: Any, module: Any, mushin_resume: ResumeContext, datamodule: Any = None
) -> dict[str, float]:
    """The task of a config-only experiment: fit (resuming from the cell's ``last.ckpt``),
    then return :meth:`MetricsCallback.final_metrics`."""
    # lazy: metrics imports torch, which only a running cell may load
    from mushin_box._train.metrics import MetricsCallbackMixin

    trainer.fit(module, datamodule=datamodule, ckpt_path=mushin_resume.last_ckpt)
    return MetricsCallbackMixin.final_metrics(trainer)
