# SPDX-License-Identifier: MIT
"""The provenance record: the ``reproducibility`` part (must match between runs) and the
``run`` part (may differ): :mod:`.record` and :mod:`.full` build it, from :mod:`.task`
(where the task is defined), :mod:`.env` (image, container, devices), :mod:`.topology`
and :mod:`.ranks` (the world, each rank's runtime) and :mod:`.elastic` (each attempt);
:mod:`.files` writes it, :mod:`.patch` keeps a dirty launch's code, :mod:`.compare`
compares two records.

Must not write anything but a cell's provenance files and a dirty launch's code, nor
import torch.
"""
