# SPDX-License-Identifier: MIT
"""From a cell's record to a checked re-run and a verdict.

- :mod:`.checks`: everything checked before anything is run: the cell, its secrets, its
  code and its image;
- :mod:`.trust`: what is checked before anything is imported: the files a record would
  have imported lie in the experiment's repository, are the user's own, at its commit;
- :mod:`.worktree`: the cell's own code (its commit, and the uncommitted code its sweep
  kept) checked out in a git worktree, leaving the user's tree as it is (``worktree``);
- :mod:`.rebuild`: the cell's image rebuilt from the recipe its record holds, kept only when
  its sha256 is the recorded one (``rebuild_image``);
- :mod:`.rerun`: ``reproduce``: the re-run from the record, then the diff and its verdict.

Must not import or run anything a record names before every check has passed.
"""
