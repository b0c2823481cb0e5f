# SPDX-License-Identifier: MIT
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from mushin_box import global_rank_from_env, seed_everything_per_rank, seed_for_rank
from mushin_box._train.seeding import seed_records


@pytest.mark.parametrize(
    ("env", "rank"),
    [
        ({}, 0),
        ({"RANK": "3"}, 3),
        ({"SLURM_PROCID": "5"}, 5),
        ({"RANK": "2", "SLURM_PROCID": "7"}, 2),  # torchrun inside an allocation
        ({"MUSHIN_GLOBAL_RANK": "1", "SLURM_PROCID": "0"}, 1),  # HydraDDP's own ranks first
    ],
)
def test_global_rank_from_env(env: dict[str, str], rank: int) -> None:
    assert global_rank_from_env(env) == rank


def test_bad_rank_env_names_the_variable() -> None:
    with pytest.raises(ValueError, match="RANK='x'"):
        global_rank_from_env({"RANK": "x"})


@pytest.mark.parametrize("bad", [1.5, "1", True, None])
def test_seed_base_must_be_int(bad: object) -> None:
    with pytest.raises(TypeError, match="seed base must be an int"):
        seed_for_rank(bad, 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_seed_everything_per_rank_seeds_all_rngs_and_records(
    rank: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSHIN_JOB_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", str(rank))
    seed = seed_everything_per_rank(1234)
    assert seed == 1234 + rank
    got = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    assert got == (random.random(), float(np.random.rand()), float(torch.rand(())))
    record = json.loads((tmp_path / ".mushin" / "seeds" / f"rank{rank}.json").read_text())
    assert record == {"base": 1234, "rank": rank, "seed": seed, "workers": True}
    assert seed_records(tmp_path)[rank]["seed"] == seed
