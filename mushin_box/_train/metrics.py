# SPDX-License-Identifier: MIT
"""``MetricsCallback``: epoch-aligned metric series, written by global rank 0 only. A
series' index name (``epoch``; ``round`` for test/validate) is reserved: a metric logged
under it is stored as ``epoch_logged`` (``round_logged``), with one warning, so that
``load_experiment`` never takes the logged values for the coordinate.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from mushin_box._core import layout
from mushin_box._core.jobdir import job_dir
from mushin_box._core.sidecars import canonical_dumps, loads, write_bytes_atomic
from mushin_box._core.targets import public
from mushin_box._train.divergence import batch_fingerprint, weights_fingerprint
from mushin_box._train.resume import current_attempt
from mushin_box._upstream.lightning import logged_names


def _to_plain(value: Any) -> float | list[Any]:
    """A float or nested lists of floats: what ``torch.load(weights_only=True)`` reads back
    without allow-listing anything."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return float(value.item()) if value.ndim == 0 else value.double().tolist()
    if isinstance(value, bool | int | float):
        return float(value)
    if hasattr(value, "tolist"):  # numpy
        out = value.tolist()
        return float(out) if isinstance(out, int | float) else out
    raise TypeError(f"cannot record metric value of type {type(value).__name__}")


class _Series:
    """Rows keyed by an index (epoch or round); columns are metric names."""

    def __init__(self, index_name: str) -> None:
        self.index_name = index_name
        self.rows: dict[int, dict[str, Any]] = {}
        self._warned = False

    def _name(self, name: str) -> str:
        """The column of a logged metric: the index's own name is reserved (see module doc)."""
        if name != self.index_name:
            return name
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"MetricsCallback: the metric name {name!r} is reserved for the series' index; "
                f"the metric logged as {name!r} is recorded as {name + '_logged'!r}",
                UserWarning,
                stacklevel=2,
            )
        return f"{name}_logged"

    def record(self, index: int, metrics: Mapping[str, Any]) -> None:
        row = self.rows.setdefault(index, {})
        for name, value in metrics.items():
            with contextlib.suppress(TypeError):  # not a number: not a metric
                row[self._name(str(name))] = _to_plain(value)

    def as_dict(self) -> dict[str, list[Any]]:
        indices = sorted(self.rows)
        names = sorted({n for row in self.rows.values() for n in row})
        # one entry per index: NaN where a metric was not logged that round
        out: dict[str, list[Any]] = {self.index_name: indices}
        nan = float("nan")
        return out | {name: [self.rows[i].get(name, nan) for i in indices] for name in names}


class MetricsCallbackMixin:
    """MetricsCallback's behaviour, mixed into the ``Callback`` of either Lightning namespace:
    it reads the trainer only through public attributes both namespaces share."""

    def __init__(
        self,
        save_dir: str | os.PathLike[str] | None = None,
        filename: str = layout.STAGE_METRICS_SUFFIX,
        fingerprints: bool = True,
    ):
        super().__init__()
        self._save_dir = Path(save_dir) if save_dir is not None else None
        self.filename = filename
        self.fingerprints = fingerprints
        #: world_size, fit_start (weights), epochs: {epoch: {first_batch, world_size,
        #: weights}}, starts: [{epoch, world_size, attempt}] (one per fit start)
        self._prints: dict[str, Any] = {"world_size": None, "fit_start": None, "epochs": {}}
        self._fit = _Series("epoch")
        self._test = _Series("round")
        self._validate = _Series("round")

    def save_dir(self) -> Path:
        return self._save_dir if self._save_dir is not None else job_dir()

    def path(self, stage: str) -> Path:
        return self.save_dir() / layout.stage_metrics_file(stage, self.filename)

    def json_path(self, stage: str) -> Path:
        """The canonical-JSON twin of :meth:`path` (``fit_metrics.json``)."""
        return self.save_dir() / layout.stage_metrics_json_file(stage, self.filename)

    def _write(self, trainer: Any, stage: str, series: _Series) -> None:
        if not trainer.is_global_zero:
            return
        data = series.as_dict()
        buffer = io.BytesIO()
        torch.save(data, buffer)
        write_bytes_atomic(self.path(stage), buffer.getvalue())
        # second, so it is never older than the .pt file (readers prefer it unless it is)
        write_bytes_atomic(self.json_path(stage), canonical_dumps(data))

    def state_dict(self) -> dict[str, Any]:
        # a fit resumed from last.ckpt continues the same series and fingerprints
        fit = {epoch: dict(row) for epoch, row in self._fit.rows.items()}
        return {"fit": fit, "fingerprints": copy.deepcopy(self._prints)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # a checkpoint of an older version may hold a metric named "epoch": renamed too
        self._fit.rows = {
            int(k): {self._fit._name(str(n)): x for n, x in v.items()}
            for k, v in state_dict.get("fit", {}).items()
        }
        prints = state_dict.get("fingerprints")
        if isinstance(prints, dict):
            self._prints = copy.deepcopy(prints)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if trainer.sanity_checking:
            return
        if trainer.state.fn == "fit":
            self._fit.record(trainer.current_epoch, _logged_by_active_loop(trainer))
        else:
            self._validate.record(len(self._validate.rows), trainer.callback_metrics)
            self._write(trainer, "validate", self._validate)

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        if self.fingerprints and trainer.is_global_zero and self._prints["fit_start"] is None:
            self._prints["fit_start"] = weights_fingerprint(pl_module)  # after any restore
            self._prints["world_size"] = trainer.world_size

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        # where and in which world this fit starts, once the loops are restored (not yet at
        # on_fit_start): the record's run.world_changes
        if not (self.fingerprints and trainer.is_global_zero):
            return
        start = {
            "epoch": int(trainer.current_epoch),
            "world_size": trainer.world_size,
            "attempt": current_attempt(job_dir()),
        }
        self._prints.setdefault("starts", []).append(start)
        self._write_prints()

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.fingerprints and batch_idx == 0 and trainer.is_global_zero:
            epoch = self._prints["epochs"].setdefault(int(trainer.current_epoch), {})
            epoch["first_batch"] = batch_fingerprint(batch)
            epoch["world_size"] = trainer.world_size  # a rank's batch depends on it

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._fit.record(trainer.current_epoch, _logged_by_active_loop(trainer))
        self._write(trainer, "fit", self._fit)
        if self.fingerprints and trainer.is_global_zero:
            epoch = self._prints["epochs"].setdefault(int(trainer.current_epoch), {})
            epoch["weights"] = weights_fingerprint(pl_module)
            epoch["step"] = int(trainer.global_step)  # how far a fit got (a resume's bound)
            self._write_prints()

    def _write_prints(self) -> None:
        epochs = [{"epoch": e, **v} for e, v in sorted(self._prints["epochs"].items())]
        record = {**self._prints, "epochs": epochs}
        write_bytes_atomic(self.save_dir() / layout.FINGERPRINTS_FILE, canonical_dumps(record))

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        if self._fit.rows:
            self._write(trainer, "fit", self._fit)

    def last_fit_values(self) -> dict[str, float]:
        """Each scalar metric's last logged value in the fit series (NaN rounds skipped)."""
        out: dict[str, float] = {}
        for epoch in sorted(self._fit.rows):
            for name, value in self._fit.rows[epoch].items():
                if isinstance(value, float) and not math.isnan(value):
                    out[name] = value
        return out

    @staticmethod
    def final_metrics(trainer: Any) -> dict[str, float]:
        """The scalar metrics a fit ended with: what a task returns as its result.

        ``trainer.callback_metrics``, completed by the trainer's :class:`MetricsCallback`
        (each metric's last logged value) for names it lacks. A metric logged as ``epoch``
        is returned as ``epoch_logged``, its name in ``fit_metrics.pt``. A fit resumed
        from a checkpoint already at ``max_epochs`` (a job killed after its fit, before its
        result was recorded) trains nothing and logs nothing; the callback's series,
        restored from that checkpoint, still holds the fit's last values.

        In a task, after ``trainer.fit(..., ckpt_path=mushin_resume.last_ckpt)``::

            return MetricsCallback.final_metrics(trainer)
        """
        out: dict[str, float] = {}
        for callback in trainer.callbacks:
            if isinstance(callback, MetricsCallbackMixin):
                out.update(callback.last_fit_values())
        for name, value in trainer.callback_metrics.items():
            key = "epoch_logged" if name == "epoch" else str(name)  # as in the file
            with contextlib.suppress(TypeError, ValueError, RuntimeError):  # non-scalar: skipped
                out[key] = float(value)  # what this run logged wins
        return out

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._test.record(len(self._test.rows), trainer.callback_metrics)
        self._write(trainer, "test", self._test)


def _logged_by_active_loop(trainer: Any) -> dict[str, Any]:
    """The callback metrics the running loop logged this round: ``callback_metrics`` keeps
    stale values (the last ``val_loss`` in an epoch without validation) that would
    misalign the series."""
    wanted = logged_names(trainer)
    metrics = trainer.callback_metrics
    return dict(metrics) if wanted is None else {k: v for k, v in metrics.items() if k in wanted}


@public
def load_metrics_file(path: str | os.PathLike[str]) -> dict[str, list[float]]:
    """Read a ``*_metrics.pt`` (or its ``*_metrics.json`` twin) written by
    :class:`MetricsCallback` (``weights_only=True``: they hold plain python types only)."""
    if Path(path).suffix == ".json":
        data = loads(Path(path).read_bytes())
    else:
        data = torch.load(Path(path), map_location="cpu", weights_only=True)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a MetricsCallback file (got {type(data).__name__})")
    return {str(k): list(v) for k, v in data.items()}
