# SPDX-License-Identifier: MIT
"""The logic of ``mushin-box launch`` and ``resume``: from an experiment file and flags to a run.

- :mod:`.plan`: the plan (launcher config, Trainer overrides, ``--torchrun``'s configs)
  and the override checks;
- :mod:`.run`: a plan run through ``Workflow.run``; what stops it early, as one line;
- :mod:`.options`: the scheduler settings with their sources, and the launch profiles;
- :mod:`.schedule`: the ``mushin_slurm`` launcher config, checked value by value;
- :mod:`.loading`: the experiment file (or ``build``'s SPEC), imported once;
- :mod:`.record`: the launch record that ``resume`` replays;
- :mod:`.resume`: what a resume does per cell, and the changes it refuses;
- :mod:`.review`: the dry run as a review, and the cluster asked first (``sbatch
  --test-only``, ``sinfo``); :mod:`.printconfig`: ``--print-config``.

Must not print or parse argv (that is :mod:`mushin_box.cli.launch`): it takes values and
returns plans, reviews and errors that name the fix.
"""
