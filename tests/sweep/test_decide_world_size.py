# SPDX-License-Identifier: MIT
"""A cell relaunched at another world size: only the run shape changed (issue 30, item 3).

``launch --gpus`` sets ``trainer.devices``, so the config fingerprint (of the whole config)
changes with the world size; the fingerprint of the config without its run-shape keys does
not. Under ``resume`` a completed cell is reused and an unfinished one continues from its
checkpoints; a real change of the config still starts afresh. And a torchrun restart is
called one, not a SLURM requeue.
"""

from __future__ import annotations

from typing import Any

from hydra_zen import builds, make_config
from omegaconf import OmegaConf

from mushin_box._sweep.cells import _plain_config, config_fingerprint, experiment_fingerprints
from mushin_box._sweep.decide import SHAPE_FREE, Decision, decide

FP2 = {"config": "at-2-gpus", "code": "k1"}  # the config fingerprint at --gpus 2
FP1 = {"config": "at-1-gpu", "code": "k1"}  # ... at --gpus 1
RUN = "run-now"


def shape_free_fingerprint(cfg: Any) -> str | None:
    return experiment_fingerprints(_plain_config(cfg))[0]


def _status(status: str, **extra: Any) -> dict[str, Any]:
    record = {"status": status, "fingerprints": dict(FP2), "run_id": "run-before"}
    return {**record, "attempt": 1, SHAPE_FREE: "exp", **extra}


def _decide(previous: Any, fingerprints: dict[str, str] = FP1, **facts: Any) -> Decision:
    facts = {"cell": "x=1", "run_id": RUN, "resume": True, "shape_free": "exp", **facts}
    return decide(previous, fingerprints, **facts)


def test_an_unfinished_cell_relaunched_with_fewer_gpus_continues_from_its_checkpoints() -> None:
    for status in ("failed", "running", "cancelled", "timeout"):
        d = _decide(_status(status))
        assert (d.action, d.continue_from_checkpoint) == ("run", True), status
        assert "another world size" in d.reason and d.warnings == ()
        assert d.previous_shape_free == "exp"


def test_a_completed_cell_at_another_world_size_is_reused_under_resume() -> None:
    d = _decide(_status("completed"))
    assert d.action == "reuse" and d.warnings == () and d.reused_despite == ()


def test_a_real_change_of_the_config_still_starts_afresh() -> None:
    for status in ("failed", "completed"):
        d = _decide(_status(status), shape_free="another experiment")
        assert (d.action, d.continue_from_checkpoint) == ("run", False), status


def test_another_world_size_without_resume_starts_afresh() -> None:
    d = _decide(_status("failed"), resume=False)
    assert (d.action, d.continue_from_checkpoint) == ("run", False)


def test_a_code_change_beside_the_world_size_starts_afresh() -> None:
    d = _decide(_status("failed"), {**FP1, "code": "k2"})
    assert (d.action, d.continue_from_checkpoint) == ("run", False)


def test_without_the_shape_free_fingerprint_a_changed_config_is_a_change() -> None:
    # a status from before it was kept, or a caller that does not know it (the resume
    # shortcut): the whole config's fingerprint decides, as before
    assert _decide(_status("failed", **{SHAPE_FREE: None})).continue_from_checkpoint is False
    assert _decide(_status("failed"), shape_free=None).continue_from_checkpoint is False
    assert _decide(_status("completed"), shape_free=None).action == "run"


def test_every_rank_decides_alike_after_rank_0_rewrote_the_status() -> None:
    # rank 0 of this run already wrote its status: the other ranks compare with what it kept
    rewritten = {
        **_status("running"),
        "run_id": RUN,
        "fingerprints": dict(FP1),
        SHAPE_FREE: "exp",
        "previous_fingerprints": dict(FP2),
        f"previous_{SHAPE_FREE}": "exp",
    }
    d = _decide(rewritten, multi_rank=True)
    assert d.continue_from_checkpoint is True and d.previous_fingerprints == FP2
    moved = {**rewritten, f"previous_{SHAPE_FREE}": "another experiment"}
    assert _decide(moved, multi_rank=True).continue_from_checkpoint is False


def test_a_torchrun_restart_is_not_called_a_slurm_requeue() -> None:
    facts = {"multi_rank": True, "restart_count": 1, "resume": False}
    torchrun = _decide(_status("running"), restarted_by="TORCHELASTIC_RESTART_COUNT", **facts)
    assert torchrun.continue_from_checkpoint is True
    assert torchrun.reason == "restarted by torchrun (TORCHELASTIC_RESTART_COUNT > 0): continuing"
    slurm = _decide(_status("running"), **facts)
    assert slurm.reason == "requeued (SLURM_RESTART_COUNT > 0): continuing"


def test_the_shape_free_fingerprint_ignores_the_world_size_only() -> None:
    trainer = builds(dict, devices=2, num_nodes=1, max_epochs=3)
    cfg = OmegaConf.create(OmegaConf.to_yaml(make_config(lr=0.1, trainer=trainer)))
    fewer = cfg.copy()
    fewer.trainer.devices = 1
    other = cfg.copy()
    other.lr = 0.2
    assert config_fingerprint(cfg) != config_fingerprint(fewer)  # the resume fingerprint
    assert shape_free_fingerprint(cfg) == shape_free_fingerprint(fewer)
    assert shape_free_fingerprint(cfg) != shape_free_fingerprint(other)
