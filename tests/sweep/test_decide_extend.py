# SPDX-License-Identifier: MIT
"""A cell resumed with a raised training limit extends its fit (issue 43, item 2).

``trainer.max_epochs``/``max_steps``/``max_time`` of a Trainer change the config
fingerprint but not the experiment: the status keeps the fingerprint of the config without
its run-shape and limit keys too. Under ``resume``, a completed or stopped cell whose only
change is a limit continues from its checkpoints, and the decision says it extends; any
other change still starts afresh, and without ``resume`` nothing continues.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from hydra_zen import builds, make_config
from omegaconf import OmegaConf

from mushin_box._sweep.cells import _plain_config, experiment_fingerprints
from mushin_box._sweep.decide import EXTENDED, LIMIT_FREE, SHAPE_FREE, Decision, decide

FP40 = {"config": "max-epochs-40", "code": "k1"}
FP900 = {"config": "max-epochs-900", "code": "k1"}
RUN = "run-now"


def shape_free_fingerprint(cfg: Any) -> str | None:
    return experiment_fingerprints(_plain_config(cfg))[0]


def limit_free_fingerprint(cfg: Any) -> tuple[str | None, dict[str, Any]]:
    _, limit_free, limits = experiment_fingerprints(_plain_config(cfg))
    return limit_free, limits


def _status(status: str, **extra: Any) -> dict[str, Any]:
    record = {"status": status, "fingerprints": dict(FP40), "run_id": "run-before"}
    return {**record, "attempt": 1, SHAPE_FREE: "shape-40", LIMIT_FREE: "fit", **extra}


def _decide(previous: Any, fingerprints: dict[str, str] = FP900, **facts: Any) -> Decision:
    facts = {
        "cell": "x=1",
        "run_id": RUN,
        "resume": True,
        "shape_free": "shape-900",
        "limit_free": "fit",
        **facts,
    }
    return decide(previous, fingerprints, **facts)


def test_a_completed_cell_with_a_raised_limit_continues_its_fit() -> None:
    d = _decide(_status("completed"))
    assert (d.action, d.continue_from_checkpoint, d.extends) == ("run", True, True)
    assert d.reason == EXTENDED and d.rerun_reason is None and d.warnings == ()
    assert d.previous_limit_free == "fit"


def test_a_stopped_cell_with_a_raised_limit_continues_and_extends() -> None:
    for status in ("failed", "cancelled", "timeout", "running"):
        d = _decide(_status(status))
        assert (d.continue_from_checkpoint, d.extends) == (True, True), status


def test_another_change_beside_the_limit_starts_afresh() -> None:
    for status in ("completed", "failed"):
        d = _decide(_status(status), limit_free="another experiment")
        assert (d.continue_from_checkpoint, d.extends) == (False, False), status
        code = _decide(_status(status), {**FP900, "code": "k2"})
        assert (code.continue_from_checkpoint, code.extends) == (False, False), status


def test_without_resume_or_an_old_status_nothing_is_extended() -> None:
    assert _decide(_status("completed"), resume=False).extends is False
    assert _decide(_status("failed"), resume=False).continue_from_checkpoint is False
    old = _decide(_status("completed", **{LIMIT_FREE: None}))  # a status from before
    assert (old.continue_from_checkpoint, old.extends) == (False, False)


def test_the_same_limits_at_another_world_size_are_still_reused() -> None:
    d = _decide(_status("completed"), shape_free="shape-40")
    assert d.action == "reuse"


def test_every_rank_extends_alike_after_rank_0_rewrote_the_status() -> None:
    rewritten = {
        **_status("running"),
        "run_id": RUN,
        "fingerprints": dict(FP900),
        LIMIT_FREE: "fit",
        "previous_fingerprints": dict(FP40),
        f"previous_{SHAPE_FREE}": "shape-40",
        f"previous_{LIMIT_FREE}": "fit",
    }
    d = _decide(rewritten, multi_rank=True)
    assert (d.continue_from_checkpoint, d.extends) == (True, True)


def _config(**trainer: Any) -> Any:
    fields = {"max_epochs": 40, "devices": 2, **trainer}
    cfg = make_config(lr=0.1, trainer=builds(pl.Trainer, **fields), model=builds(dict, max_steps=5))
    return OmegaConf.create(OmegaConf.to_yaml(cfg))


def test_the_limit_free_fingerprint_sets_apart_a_trainers_limits_only() -> None:
    base = _config()
    longer = _config(max_epochs=900, devices=1)
    fp, limits = limit_free_fingerprint(base)
    assert limits == {"trainer.max_epochs": 40}
    assert limit_free_fingerprint(longer) == (fp, {"trainer.max_epochs": 900})
    assert shape_free_fingerprint(base) != shape_free_fingerprint(longer)
    other = base.copy()
    other.lr = 0.2
    assert limit_free_fingerprint(other)[0] != fp
    steps = base.copy()
    steps.model.max_steps = 6  # not a Trainer's: a change of the experiment
    assert limit_free_fingerprint(steps)[0] != fp
