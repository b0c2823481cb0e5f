# SPDX-License-Identifier: MIT
"""The twin of :mod:`.pl` on ``lightning.pytorch`` (``import lightning as L``); the classes'
door and ``__module__`` is :mod:`mushin_box.lightning`."""

from __future__ import annotations

import lightning.pytorch as lp

from mushin_box._train.ddp import HydraDDPMixin
from mushin_box._train.metrics import MetricsCallbackMixin
from mushin_box._train.tiny import TinyDataModuleMixin, TinyModuleMixin
from mushin_box._upstream.lightning import strategy_base


class HydraDDP(HydraDDPMixin, strategy_base("lightning.pytorch")):
    """:class:`mushin_box.HydraDDP` on ``lightning.pytorch``: same parameters, same behaviour."""


class MetricsCallback(MetricsCallbackMixin, lp.Callback):
    """:class:`mushin_box.MetricsCallback` on ``lightning.pytorch``: same parameters, same
    files. ``MetricsCallback.final_metrics`` reads a Trainer of either namespace."""


class TinyModule(TinyModuleMixin, lp.LightningModule):
    """:class:`mushin_box.testing.TinyModule` on ``lightning.pytorch``."""


class TinyDataModule(TinyDataModuleMixin, lp.LightningDataModule):
    """:class:`mushin_box.testing.TinyDataModule` on ``lightning.pytorch``."""


for _cls in (HydraDDP, MetricsCallback, TinyModule, TinyDataModule):
    _cls.__module__ = "mushin_box.lightning"  # their door: saved configs name it
