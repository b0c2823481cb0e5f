# SPDX-License-Identifier: MIT
"""What runs inside a rank: HydraDDP and its child entry point, per-rank seeding,
MetricsCallback, and the resume contract.

Knows nothing of sweeps or SLURM options. Modules that need torch import it themselves, so
this package's ``__init__`` stays empty: readers of sidecars import the torch-free modules
(seeding records, resume bookkeeping) without paying for torch.
"""
