# SPDX-License-Identifier: MIT
"""The disk and rank-env contract, shared by every room.

- :mod:`.layout`: every file name and every ``MUSHIN_*`` variable;
- :mod:`.redact` and :mod:`.secrets`: the secret rule, redaction (files and the terminal), and
  the secrets vault;
- :mod:`.sidecars`: atomic, canonical JSON sidecars and bounded reads;
- :mod:`.durable`: when an atomic write is synced: at once, or at a cell's commit points;
- :mod:`.gcpause`: the garbage collector paused while a sweep is read in bulk;
- :mod:`.safeio`: the bounded, no-symlink reads of a sweep directory's files;
- :mod:`.overrides` and :mod:`.overrideparse`: Hydra's override grammar, both ways;
- :mod:`.jobdir` and :mod:`.jobskip`: the job directory, and the jobs a launch leaves out;
- :mod:`.envstate`: ``os.environ`` put back as it was;
- :mod:`.procs`: an outside tool run for a bounded time, stopped whole (its process group);
- :mod:`.userfile`: a user's Python file imported, the one way the kit does it;
- :mod:`.targets`: stable names for configs, records and pickles;
- :mod:`.version`: the package version;
- :mod:`.errors`: the error root, :class:`~.errors.MushinBoxError`.

Must not import another room, nor torch or Lightning.
"""
