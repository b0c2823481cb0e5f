# SPDX-License-Identifier: MIT
"""The submit-time side of running ranks in an image.

- :mod:`.launchspec`: what the rank container is (``ContainerLaunch`` and its parts);
- :mod:`.rankwrap`: the env file (written and read back) and every rank's ``apptainer exec``;
- :mod:`.preflight`: the image checked before anything is submitted;
- :mod:`.smoke`: the 2-rank smoke run inside the image (and, as ``__main__``, a rank).

Must not build images (that is :mod:`mushin_box._image`).
"""
