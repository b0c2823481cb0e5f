# SPDX-License-Identifier: MIT
"""Hydra launcher plugin of mushin-box: ``hydra/launcher=mushin_slurm`` and ``mushin_local``.

Hydra finds this package in the ``hydra_plugins`` namespace package (no ``__init__.py``
there: it is shared with other plugins, e.g. hydra-submitit-launcher). The logic lives in
:mod:`mushin_box._slurm.launcher`.
"""
