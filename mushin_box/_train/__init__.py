# SPDX-License-Identifier: MIT
"""What runs inside a rank.

- :mod:`.ddp` and :mod:`.ddp_child`: ``HydraDDP`` and the entry point of the ranks it starts;
- :mod:`.ranks`: rank 0's watch over the ranks it started;
- :mod:`.world`: does an external launcher's world match the Trainer;
- :mod:`.seeding`: per-rank seeding and its records;
- :mod:`.sampling`: the world-size-invariant sampler;
- :mod:`.metrics`: ``MetricsCallback``;
- :mod:`.divergence`: the fingerprints of a fit (weights, first batches) it records;
- :mod:`.resume`: the ``mushin_resume`` checkpoint contract;
- :mod:`.signals`: SIGTERM as an exception that unwinds the task;
- :mod:`.configtask`: the task of a config-only experiment (``fit_task``, stable names);
- :mod:`.tiny`: a tiny Lightning module and data for examples, tests and smoke runs;
- :mod:`.pl` and :mod:`.lp`: the mixins above (free of Lightning) on ``pytorch_lightning``'s
  and ``lightning.pytorch``'s bases (a Trainer takes only its own namespace's classes).

Must not know of sweeps or SLURM options, nor import torch in ``__init__``: readers of
sidecars import the torch-free modules (seeding records, resume bookkeeping).
"""
