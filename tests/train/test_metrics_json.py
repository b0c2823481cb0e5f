# SPDX-License-Identifier: MIT
"""MetricsCallback's canonical-JSON twin (``fit_metrics.json``): the same series as the
``.pt`` file, with the same epoch alignment, NaN and reserved-name rules, readable by any
JSON reader."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from workflow_tasks import quiet_trainer

from mushin_box import MetricsCallback, load_metrics_file
from mushin_box._core.sidecars import loads
from mushin_box.testing import TinyDataModule, TinyModule


class _LogsEpoch(TinyModule):
    def validation_step(self, batch: Any, batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        self.log("epoch", float(10 * self.current_epoch))


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) if isinstance(x, float) and math.isnan(x) else x == y
        for x, y in zip(a, b, strict=True)
    )


def test_the_json_twin_holds_the_same_series_as_the_pt_file(tmp_path: Path) -> None:
    trainer = quiet_trainer(
        4,
        callbacks=[MetricsCallback(save_dir=tmp_path)],
        enable_checkpointing=False,
        check_val_every_n_epoch=2,  # val_loss NaN in epochs 0 and 2
    )
    with pytest.warns(UserWarning, match="'epoch' is reserved"):
        trainer.fit(_LogsEpoch(), datamodule=TinyDataModule())
    trainer.test(TinyModule(), datamodule=TinyDataModule())
    for stage, index in (("fit", "epoch"), ("test", "round")):
        pt = torch.load(tmp_path / f"{stage}_metrics.pt", weights_only=True)
        raw = (tmp_path / f"{stage}_metrics.json").read_bytes()
        twin = loads(raw)
        assert sorted(twin) == sorted(pt)
        for name in pt:
            assert _same(twin[name], pt[name]), (stage, name)
        assert isinstance(json.loads(raw), dict)  # strict JSON: NaN is a tagged object
        assert twin[index] == list(range(len(twin[index])))
    fit = load_metrics_file(tmp_path / "fit_metrics.json")
    assert fit["epoch"] == [0, 1, 2, 3]
    assert fit["epoch_logged"][1] == 10.0 and math.isnan(fit["epoch_logged"][0])
    assert math.isnan(fit["val_loss"][0]) and not math.isnan(fit["val_loss"][1])
    assert b'{"__float__":"nan"}' in (tmp_path / "fit_metrics.json").read_bytes()


def test_the_twin_follows_a_custom_filename(tmp_path: Path) -> None:
    callback = MetricsCallback(save_dir=tmp_path, filename="series.pt")
    quiet_trainer(1, callbacks=[callback], enable_checkpointing=False).fit(
        TinyModule(), datamodule=TinyDataModule()
    )
    assert callback.json_path("fit") == tmp_path / "fit_series.json"
    assert (tmp_path / "fit_series.json").is_file() and (tmp_path / "fit_series.pt").is_file()
