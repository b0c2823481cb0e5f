# SPDX-License-Identifier: MIT
"""The provenance record: the ``reproducibility`` part (must match between runs) and the
``run`` part (may differ).

- :mod:`.record` and :mod:`.full`: the basic record and the whole two-part record;
- :mod:`.task`: where the task and ``pre_call`` are defined (``run.task``), and their import;
- :mod:`.env`: facts about where a cell ran: image, container, devices;
- :mod:`.topology`: the world a cell ran in, rank by rank;
- :mod:`.ranks`: where each rank ran: its own Python, and the image it ran in;
- :mod:`.elastic`: each attempt of a cell's fit and its world (``run.attempts``,
  ``run.world_changes``, ``run.elastic``);
- :mod:`.files`: the provenance files of a cell;
- :mod:`.patch`: the uncommitted code of a dirty launch, kept in the sweep (bounded, no
  secrets);
- :mod:`.compare`: two records (and their metrics) compared.

Builds the whole record. Must not write anything but a cell's provenance files and a
dirty launch's code, nor import torch.
"""
