# SPDX-License-Identifier: MIT
"""The provenance record: the ``reproducibility`` part (must match between runs) and the
``run`` part (may differ).

- :mod:`.record` and :mod:`.full`: the basic record and the whole two-part record;
- :mod:`.task`: where the task and ``pre_call`` are defined (``run.task``);
- :mod:`.env`: the image, container and devices a cell ran on;
- :mod:`.topology` and :mod:`.ranks`: the world a cell ran in, and each rank's runtime;
- :mod:`.elastic`: each attempt of a cell's fit and its world;
- :mod:`.files`: a cell's provenance files;
- :mod:`.patch`: a dirty launch's uncommitted code, kept in the sweep (bounded, no secrets);
- :mod:`.compare`: two records (and their metrics) compared.

Must not write anything but a cell's provenance files and a dirty launch's code, nor
import torch.
"""
