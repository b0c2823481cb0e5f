# SPDX-License-Identifier: MIT
"""The kit's Lightning classes on ``pytorch_lightning``: each is its behaviour's mixin on
this namespace's base, with the docstring users read.
"""

from __future__ import annotations

import pytorch_lightning as pl

from mushin_box._core.targets import public
from mushin_box._train.ddp import HydraDDPMixin
from mushin_box._train.metrics import MetricsCallbackMixin
from mushin_box._train.tiny import TinyDataModuleMixin, TinyModuleMixin
from mushin_box._upstream.lightning import strategy_base


@public
class HydraDDP(HydraDDPMixin, strategy_base("pytorch_lightning")):
    """DDP strategy for Lightning Trainers built from hydra-zen/Hydra configs.

    Use it as ``strategy=builds(HydraDDP)``. The job's config must have top-level
    ``trainer`` and ``module`` nodes (and optionally ``datamodule``): the ranks HydraDDP
    starts instantiate those and call the same trainer method with the same ``ckpt_path``
    as rank 0. Under SLURM tasks or torchrun it starts nothing and only checks the world
    size. With ``import lightning as L``, use ``mushin_box.lightning.HydraDDP``.

    Parameters
    ----------
    child_exit_timeout_s : float (default: 120)
        How long rank 0 waits, when its trainer call ends, for the ranks it started to
        exit before killing them.
    rendezvous_timeout_s : float or None (default: 300)
        How long a rank launched as its own process (a SLURM task, a torchrun worker, a
        rank HydraDDP started) may take to join the process group, before it prints what it
        waited for (``MASTER_ADDR:MASTER_PORT``, its rank, the world size) and exits with
        status 1 instead of retrying for torch's 30 minutes. ``None`` disables it; the
        collectives' own ``timeout`` is unchanged.
    **kwargs
        Passed to :class:`pytorch_lightning.strategies.DDPStrategy`.

    Examples
    --------
    >>> import pytorch_lightning as pl
    >>> from hydra_zen import builds, make_config
    >>> from mushin_box import HydraDDP
    >>> from mushin_box.testing import TinyModule, TinyDataModule
    >>> Config = make_config(
    ...     trainer=builds(pl.Trainer, accelerator="cpu", devices=2,
    ...                    strategy=builds(HydraDDP), max_epochs=1),
    ...     module=builds(TinyModule),
    ...     datamodule=builds(TinyDataModule),
    ... )
    """


@public
class MetricsCallback(MetricsCallbackMixin, pl.Callback):
    """Record everything logged with ``self.log`` as epoch-aligned series.

    After each epoch and at the end of fit, global rank 0 (only, so ranks never race on a
    shared filesystem) writes ``fit_metrics.pt``; after test ``test_metrics.pt``
    (``validate_metrics.pt`` for a standalone ``trainer.validate()``). Files are written
    atomically and hold plain python types: ``{"epoch": [0, 1, ...], "<metric>": [v0, v1,
    ...], ...}``, NaN where a metric was not logged in a round. ``epoch`` and ``round`` are
    the index: a metric logged under that name is recorded as ``epoch_logged``
    (``round_logged``), with one warning. Read them with :func:`load_metrics_file` or
    ``torch.load(path, weights_only=True)``.

    After each ``.pt`` file the same series is written as canonical JSON
    (``fit_metrics.json``; NaN as ``{"__float__":"nan"}``), which ``load_experiment`` reads
    without importing torch. With ``import lightning as L``, use
    ``mushin_box.lightning.MetricsCallback``.

    Parameters
    ----------
    save_dir : str | os.PathLike | None (default: None)
        Where to write. ``None`` means the job directory (:func:`mushin_box.job_dir`),
        resolved when the trainer starts.
    filename : str (default: "metrics.pt")
        Files are named ``f"{stage}_{filename}"``.
    fingerprints : bool (default: True)
        Also write ``fit_fingerprints.json``: hashes of the weights at the fit's start and
        each epoch's end, and of each epoch's first batch, from which ``diff`` names where
        two runs part. One pass over the weights per epoch.

    Examples
    --------
    >>> import pytorch_lightning as pl
    >>> from hydra_zen import builds
    >>> from mushin_box import MetricsCallback
    >>> TrainerConf = builds(pl.Trainer, callbacks=[builds(MetricsCallback)])
    """


class TinyModule(TinyModuleMixin, pl.LightningModule):
    __doc__ = TinyModuleMixin.__doc__


class TinyDataModule(TinyDataModuleMixin, pl.LightningDataModule):
    __doc__ = TinyDataModuleMixin.__doc__


for _cls in (TinyModule, TinyDataModule):
    _cls.__module__ = "mushin_box.testing"
