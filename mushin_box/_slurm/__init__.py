# SPDX-License-Identifier: MIT
"""Everything that speaks sbatch, srun, squeue, sacct and scancel: the launcher config
builder, the Hydra launcher on submitit, the host-side requeue trap, and the one list of
SLURM job states (:mod:`.jobs`). Holds no sweep policy.
"""
