# SPDX-License-Identifier: MIT
"""The disk and rank-env contract, shared by every room.

- :mod:`.layout`: every file name and every ``MUSHIN_*`` variable;
- :mod:`.redact` and :mod:`.secrets`: the secret rule, redaction, and the secrets vault;
- :mod:`.sidecars`, :mod:`.durable`, :mod:`.safeio`: atomic JSON sidecars, when their writes
  are synced, and bounded, no-symlink reads; :mod:`.gcpause`: bulk reads without the GC;
- :mod:`.overrides` and :mod:`.overrideparse`: Hydra's override grammar, both ways;
- :mod:`.jobdir` and :mod:`.jobskip`: the job directory, and the jobs a launch leaves out;
- :mod:`.envstate`, :mod:`.procs`, :mod:`.userfile`: ``os.environ`` put back, an outside
  tool run for a bounded time, a user's Python file imported;
- :mod:`.targets`, :mod:`.version`, :mod:`.errors`: stable names for configs and records,
  the package version, the error root (:class:`~.errors.MushinBoxError`).

Must not import another room, nor torch or Lightning.
"""
