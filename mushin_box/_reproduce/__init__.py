# SPDX-License-Identifier: MIT
"""From a cell's record to a checked re-run and a verdict: :mod:`.checks` (the cell, its
secrets, code and image), :mod:`.trust` (the files a record would import, checked before
any import; the cell's code checked out in a worktree), :mod:`.rebuild` (its image
rebuilt from its recipe) and :mod:`.rerun` (``reproduce``: the re-run, its diff, verdict).

Must not import or run anything a record names before every check has passed.
"""
