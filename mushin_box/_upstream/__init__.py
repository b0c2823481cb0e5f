# SPDX-License-Identifier: MIT
"""The seams: every private name of an upstream package is reached here, and only here
(``scripts/check-imports`` refuses one elsewhere), so an upstream release that moves one
breaks one seam and its named test in ``tests/upstream/``, not the package.

One module per upstream, each name public-looking, with why no public API does it:
:mod:`.hydra`, :mod:`.omegaconf`, :mod:`.submitit`, :mod:`.lightning` (both namespaces),
:mod:`.torch` (how torch elastic records a failed worker).

Must not import another room, nor hold the kit's logic, nor import an upstream on import.
"""
