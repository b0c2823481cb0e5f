# SPDX-License-Identifier: MIT
"""The kit's Lightning classes for ``import lightning as L`` (``lightning.pytorch``).

Lightning ships two namespaces whose classes differ: a Trainer of ``lightning.pytorch``
refuses a strategy or callback of ``pytorch_lightning`` ("invalid strategy"). So the classes
that subclass Lightning's exist once per namespace, with one behaviour:

- ``mushin_box.HydraDDP``, ``mushin_box.MetricsCallback``, ``mushin_box.testing.TinyModule``
  and ``TinyDataModule``: on ``pytorch_lightning`` (``import pytorch_lightning as pl``);
- the same names here: on ``lightning.pytorch``.

Everything else the kit offers (``resumable``, ``mushin_resume``, ``seed_everything_per_rank``,
``load_experiment``, ``Workflow``...) works with either, from ``mushin_box``. Importing this
module imports ``lightning``; ``import mushin_box`` does not.

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
