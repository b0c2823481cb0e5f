# SPDX-License-Identifier: MIT
"""The image build side: ImageSpec, the definition-file renderer, Dockerfile import,
``apptainer build`` with its manifest, and the SIF header reader. Knows nothing of SLURM.
"""
