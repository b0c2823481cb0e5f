# SPDX-License-Identifier: MIT
"""The image build side.

- :mod:`.spec`: ``ImageSpec``, the image as config-as-code;
- :mod:`.bases`: the bases that need no registry (``Debootstrap``, ``LocalImage``);
- :mod:`.definition`: its Apptainer definition file;
- :mod:`.dockerfile`: an ``ImageSpec`` started from a user's Dockerfile;
- :mod:`.build`: a build (either backend) and the manifest of the image's identity;
- :mod:`.native`: the native backend: mmdebstrap, pip and ``pack``, no Apptainer;
  :mod:`.intree`: what it runs in the image's tree (mmdebstrap's hook);
- :mod:`.adopt`: the manifest of an image the kit did not build;
- :mod:`.sif`: the SIF reader and writer (a squashfs as a SIF);
- :mod:`.pack`: a tree as a bit-reproducible SIF, and the first difference of two SIFs;
- :mod:`.digest`: an image's sha256, cached.

Must not know of SLURM, nor import torch.
"""
