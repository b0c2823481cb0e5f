# SPDX-License-Identifier: MIT
"""A 2-rank run reproduces the 1-rank run with WorldSizeInvariantSampler (issue 17, item 12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from hydra_zen import builds, launch, make_config

from mushin_box import (
    HydraDDP,
    WorldSizeInvariantSampler,
    resumable,
    seed_everything_per_rank,
)
from mushin_box.testing import TinyDataModule, TinyModule

# float32 sums in another order (two half-batch means, then the all-reduce mean, against
# one mean over the batch) differ by a few ulps per step: 8 SGD steps measured 7.5e-9 on
# weights of size ~0.7. The stock loader at 2 ranks (batch_size per rank, so twice the
# global batch and half the steps) ends 0.25 away.
ATOL = 1e-6


def _steps(n: int, global_batch: int, world: int, epoch: int, **kw: Any) -> list[list[int]]:
    """The sorted union of the ranks' batches, per step (DataLoader batching on each rank)."""
    per_rank = []
    for rank in range(world):
        sampler = WorldSizeInvariantSampler(
            list(range(n)), global_batch, num_replicas=world, rank=rank, **kw
        )
        sampler.set_epoch(epoch)
        order = list(sampler)
        b = sampler.local_batch_size
        per_rank.append([order[i : i + b] for i in range(0, len(order), b)])
    assert len({len(batches) for batches in per_rank}) == 1, "every rank takes as many steps"
    return [sorted(sum(step, [])) for step in zip(*per_rank, strict=True)]


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("epoch", [0, 3])
def test_union_of_rank_batches_is_the_one_rank_batch(world: int, epoch: int) -> None:
    one = _steps(70, 8, 1, epoch, seed=5)
    assert _steps(70, 8, world, epoch, seed=5) == one
    assert len(one) == 70 // 8 and all(len(step) == 8 for step in one)  # tail dropped


def test_the_global_order_is_a_function_of_seed_and_epoch_only() -> None:
    def order(world: int, rank: int, seed: int, epoch: int) -> list[int]:
        s = WorldSizeInvariantSampler(range(64), 16, num_replicas=world, rank=rank, seed=seed)
        s.set_epoch(epoch)
        return s.global_order()

    base = order(1, 0, seed=1, epoch=0)
    assert sorted(base) == list(range(64)) and base != list(range(64))
    assert order(4, 3, seed=1, epoch=0) == base
    assert order(1, 0, seed=1, epoch=1) != base
    assert order(1, 0, seed=2, epoch=0) != base


def test_stock_distributed_sampler_pads_when_the_world_does_not_divide_the_data() -> None:
    # torch's DistributedSampler shards one seed+epoch permutation by stride, so its order
    # holds across world sizes while they divide the data; otherwise it repeats samples
    from torch.utils.data import DistributedSampler

    def stock_steps(world: int) -> list[list[int]]:
        b = 8 // world
        data: Any = range(70)
        parts = [list(DistributedSampler(data, world, r, seed=5)) for r in range(world)]
        batches = [[p[i : i + b] for i in range(0, len(p), b)] for p in parts]
        return [sorted(sum(step, [])) for step in zip(*batches, strict=True)]

    one, four = stock_steps(1), stock_steps(4)
    assert four[:8] == one[:8] and four[8:] != one[8:]
    seen = sum(four, [])
    assert (len(seen), len(set(seen))) == (72, 70), "padding trains on 2 samples twice"


def test_an_even_tail_is_kept_and_an_uneven_one_refused() -> None:
    one = _steps(20, 8, 1, 0, shuffle=False, drop_last=False)
    assert _steps(20, 8, 2, 0, shuffle=False, drop_last=False) == one
    assert one[-1] == [16, 17, 18, 19]
    with pytest.raises(ValueError, match="last global batch has 4 samples.*drop_last=True"):
        WorldSizeInvariantSampler(range(20), 8, num_replicas=8, rank=0, drop_last=False)


@pytest.mark.parametrize("bad", [0, 6, 2.0])
def test_a_global_batch_that_does_not_split_is_refused(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="global_batch_size"):
        WorldSizeInvariantSampler(range(64), bad, num_replicas=4, rank=0)


def test_defaults_to_one_rank_without_a_process_group() -> None:
    sampler = WorldSizeInvariantSampler(range(10), 4, shuffle=False)
    assert (sampler.num_replicas, sampler.rank, sampler.local_batch_size) == (1, 0, 4)
    assert list(sampler) == list(range(8)) and len(sampler) == 8


# --- real DDP: final weights at 1 and at 2 ranks ---


def _fit(
    seed: int, trainer: Any, module: TinyModule, datamodule: TinyDataModule
) -> tuple[list[float], int]:
    trainer.fit(module, datamodule=datamodule)
    dist = torch.distributed
    processes = dist.get_world_size() if dist.is_initialized() else 1
    return torch.cat([p.detach().flatten() for p in module.parameters()]).tolist(), processes


def _final_weights(root: Path, devices: int) -> torch.Tensor:
    config = make_config(
        seed=1234,
        trainer=builds(
            pl.Trainer,
            accelerator="cpu",
            devices=devices,
            max_epochs=2,
            # 1 device: Lightning's single-device run, as a 1-GPU run is
            strategy=builds(HydraDDP, child_exit_timeout_s=60.0) if devices > 1 else "auto",
            default_root_dir="${hydra:runtime.output_dir}",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        ),
        module=builds(TinyModule, lr=0.05),
        datamodule=builds(TinyDataModule, global_batch_size=16),
    )
    # seeded before zen builds the module: its initial weights are the same in every run
    task = resumable(_fit, pre_call=lambda cfg: seed_everything_per_rank(cfg.seed))
    job = launch(
        config, task, overrides=[f"hydra.run.dir={root / str(devices)}"], version_base="1.3"
    )
    weights, processes = job.return_value
    assert processes == devices, "every rank trained in its own process"
    return torch.tensor(weights)


@pytest.mark.slow
def test_two_ranks_reproduce_one_rank(cleandir: Path) -> None:
    one = _final_weights(cleandir, devices=1)
    two = _final_weights(cleandir, devices=2)
    diff = float((one - two).abs().max())
    assert diff <= ATOL, f"1 vs 2 ranks differ by {diff:.3g}"
