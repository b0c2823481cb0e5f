# SPDX-License-Identifier: MIT
"""The seams: every private name of an upstream package is reached here, and only here.

One module per upstream, each name with a public-looking name, the reason no public API
does it, and a test in ``tests/upstream/`` that names the upstream change when it fails.
``scripts/check-imports`` refuses a private upstream name anywhere else, so an upstream
release that moves one breaks one module and one named test, not the package.

Seams: :mod:`.hydra`, :mod:`.omegaconf`, :mod:`.submitit`, :mod:`.lightning` (both
namespaces), :mod:`.torch` (how torch elastic records a failed worker).

Must not import another room, nor hold the kit's logic. Importing this package imports no
upstream; import the one seam you need.
"""
