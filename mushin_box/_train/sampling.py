# SPDX-License-Identifier: MIT
"""A sampler whose global batches do not depend on the world size (the stock
``DistributedSampler``'s order and global batch change with it): DDP averages the ranks'
equal-sized means, so each optimizer step equals the 1-rank step up to summation order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DistributedSampler

from mushin_box._core.targets import public


@public
class WorldSizeInvariantSampler(DistributedSampler):  # type: ignore[type-arg]
    """Indices of this rank's share of each fixed-size global batch.

    The global order depends on ``seed`` and the epoch only (``torch.randperm`` seeded
    ``seed + epoch``, or ``0..n-1`` unshuffled), cut into global batches; rank ``r`` gets
    the ``r``-th contiguous slice of ``local_batch_size = global_batch_size //
    num_replicas`` indices of each. Use it with ``DataLoader(dataset,
    batch_size=sampler.local_batch_size, sampler=sampler)``. Lightning keeps a
    ``DistributedSampler`` it is given and calls :meth:`set_epoch` every epoch.

    Parameters
    ----------
    dataset : Dataset
        A map-style dataset (it has ``len``).
    global_batch_size : int
        Samples per optimizer step over all ranks. Every world size you compare must divide
        it (e.g. a multiple of 64 to compare 1 to 64 ranks).
    num_replicas, rank : int, optional
        The world size and this rank; default: the initialized process group's, else 1 and 0.
    shuffle : bool (default: True)
        Shuffle the global order each epoch (by ``seed + epoch``, never by rank).
    seed : int (default: 0)
        The shuffling seed, the same on every rank (not the per-rank seed).
    drop_last : bool (default: True)
        Drop the last, incomplete global batch. With ``False`` it is kept, which is world
        size invariant only when it splits evenly over the ranks: otherwise ``ValueError``.

    Examples
    --------
    >>> from mushin_box import WorldSizeInvariantSampler
    >>> data = list(range(8))
    >>> one = WorldSizeInvariantSampler(data, 4, num_replicas=1, rank=0, shuffle=False)
    >>> [list(WorldSizeInvariantSampler(data, 4, num_replicas=2, rank=r, shuffle=False))
    ...  for r in range(2)]
    [[0, 1, 4, 5], [2, 3, 6, 7]]
    >>> list(one)
    [0, 1, 2, 3, 4, 5, 6, 7]
    """

    def __init__(
        self,
        dataset: Dataset[Any] | Sized,
        global_batch_size: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = True,
    ) -> None:
        group = dist.is_available() and dist.is_initialized()
        if num_replicas is None:
            num_replicas = dist.get_world_size() if group else 1
        if rank is None:
            rank = dist.get_rank() if group else 0
        super().__init__(
            dataset,  # pyright: ignore[reportArgumentType]
            num_replicas=num_replicas,
            rank=rank,
            shuffle=shuffle,
            seed=seed,
            drop_last=drop_last,
        )
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int):
            raise TypeError(f"global_batch_size must be an int, got {global_batch_size!r}")
        if global_batch_size < 1 or global_batch_size % num_replicas:
            raise ValueError(
                f"global_batch_size={global_batch_size} does not split over {num_replicas} "
                f"ranks; choose a positive multiple of every world size you run (e.g. of 64 "
                f"for 1 to 64 ranks)"
            )
        n = len(dataset)  # type: ignore[arg-type]
        tail = 0 if drop_last else n % global_batch_size
        if tail % num_replicas:
            raise ValueError(
                f"the last global batch has {tail} samples, which do not split over "
                f"{num_replicas} ranks; pass drop_last=True or a dataset size whose remainder "
                f"modulo global_batch_size={global_batch_size} every world size divides"
            )
        self.global_batch_size = global_batch_size
        self.local_batch_size = global_batch_size // num_replicas
        self._full_steps = n // global_batch_size
        self._tail = tail
        self.num_samples = self._full_steps * self.local_batch_size + tail // num_replicas
        self.total_size = self.num_samples * num_replicas

    def global_order(self) -> list[int]:
        """This epoch's order over all ranks: the 1-rank order, whatever the world size."""
        n = len(self.dataset)  # type: ignore[arg-type]
        if not self.shuffle:
            return list(range(n))
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(n, generator=gen).tolist()

    def __iter__(self) -> Iterator[int]:
        order = self.global_order()
        # each full global batch, then the kept tail (empty with drop_last)
        shares = [self.local_batch_size] * self._full_steps + [self._tail // self.num_replicas]
        out: list[int] = []
        for step, share in enumerate(shares):
            start = step * self.global_batch_size + self.rank * share
            out.extend(order[start : start + share])
        return iter(out)

    def __len__(self) -> int:
        return self.num_samples
