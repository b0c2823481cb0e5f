# SPDX-License-Identifier: MIT
"""The logic of ``mushin-box launch`` and ``resume``: from an experiment file and flags to a run.

- :mod:`.plan`: the plan (``--nodes``/``--gpus`` to launcher config and Trainer
  overrides) and the override checks a launch starts with;
- :mod:`.run`: a plan run through ``Workflow.run``, and what stops it before a cell ran
  as one line;
- :mod:`.torchrunplan`: ``--torchrun``'s launcher configs (here one agent, on SLURM one per
  node) and ``--nodes MIN:MAX``'s Trainer override;
- :mod:`.options` and :mod:`.profiles`: the scheduler settings, each with its source, and
  the launch profiles they may come from;
- :mod:`.schedule`: the ``mushin_slurm`` launcher config, checked value by value;
- :mod:`.loading`: the experiment file (or ``build``'s SPEC), imported once;
- :mod:`.cluster`: the cluster asked first (``sbatch --test-only``, ``sinfo``): a job
  SLURM would refuse, or one that could never start, is refused before anything is written;
- :mod:`.record`: the launch record kept in the sweep directory, which ``resume`` replays;
- :mod:`.resume`: ``mushin-box resume``: the recorded launch again, what it does per cell
  (reuse, continue, restart), the cells it runs, and the changes it refuses;
- :mod:`.review`: the dry run as a review: what would run and what it would cost;
- :mod:`.printconfig`: ``--print-config``: the first cell's composed config.

Must not print or parse argv (that is :mod:`mushin_box.cli.launch`): it takes values and
returns plans, reviews and errors that name the fix.
"""
