# SPDX-License-Identifier: MIT
"""The logic of ``mushin-box launch`` and ``resume``: from an experiment file and flags to a run.

:mod:`.plan` (launcher config, Trainer overrides, ``--torchrun``'s configs; the override
checks), :mod:`.run` (the plan through ``Workflow.run``; what stops it early, in one line),
:mod:`.options` (scheduler settings with their sources; launch profiles), :mod:`.schedule`
(the ``mushin_slurm`` config, checked value by value), :mod:`.loading` (the experiment file,
or ``build``'s SPEC), :mod:`.record` (the launch record ``resume`` replays), :mod:`.resume`
(what a resume does per cell; the changes it refuses), :mod:`.review` (the dry run, and the
cluster asked first) and :mod:`.printconfig` (``--print-config``).

Must not print or parse argv (that is :mod:`mushin_box.cli.launch`): it takes values and
returns plans, reviews and errors that name the fix.
"""
