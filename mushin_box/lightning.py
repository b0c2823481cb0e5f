# SPDX-License-Identifier: MIT
"""The kit's Lightning classes for ``import lightning as L`` (``lightning.pytorch``).

A Trainer of ``lightning.pytorch`` refuses a strategy or callback of ``pytorch_lightning``
("invalid strategy"), so the kit's Lightning subclasses exist once per namespace, with one
behaviour: ``mushin_box.HydraDDP``, ``mushin_box.MetricsCallback`` and
``mushin_box.testing.TinyModule``/``TinyDataModule`` on ``pytorch_lightning``; the same
names here on ``lightning.pytorch``. Everything else (``resumable``, ``Workflow``...) works
with either, from ``mushin_box``. Importing this module imports ``lightning``.

Examples
--------
>>> import lightning as L
>>> from hydra_zen import builds
>>> from mushin_box.lightning import HydraDDP, MetricsCallback
>>> TrainerConf = builds(L.Trainer, strategy=builds(HydraDDP),
...                      callbacks=[builds(MetricsCallback)])
>>> TrainerConf.strategy._target_
'mushin_box.lightning.HydraDDP'
"""

from __future__ import annotations

from mushin_box._train.lp import HydraDDP, MetricsCallback, TinyDataModule, TinyModule

__all__ = ["HydraDDP", "MetricsCallback", "TinyDataModule", "TinyModule"]
