# SPDX-License-Identifier: MIT
"""Everything that speaks sbatch, srun, squeue, sacct and scancel, and torchrun.

- :mod:`.config`: the launcher config builder (``submitit_slurm_config``);
- :mod:`.grammar`: SLURM's own grammars for ``--time`` and ``--mem``;
- :mod:`.launcher`: the Hydra launchers ``mushin_slurm`` and ``mushin_local`` on submitit;
- :mod:`.arrays`: a sweep as job arrays within the cluster's MaxArraySize, throttled as one;
- :mod:`.torchrun`: a cell's ranks as torchrun workers, one agent per node, and where a
  job's ranks write their output;
- :mod:`.requeue`: the batch shell's requeue trap;
- :mod:`.jobs`: job states and job ids, once (``<array job>_<task>``);
- :mod:`.submitted`: the jobs a launch submitted, written down at once;
- :mod:`.probe`: is a cluster reachable, and what sbatch said when it refused a job.

Must not hold sweep policy, nor import torch.
"""
