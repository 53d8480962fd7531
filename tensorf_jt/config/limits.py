"""The largest sizes a run may ask for and a checkpoint may hold: one set of bounds, which the
configuration checks flags against and the file readers check files against, so every run
``train.py`` starts writes files that ``render.py``, ``view.py`` and ``--resume`` read back.

The limits are far above any trained TensoRF (lego ends at 299^3 voxels, Tanks and Temples at
~640^3) and at what the kernels can address: they index voxels with 32-bit ints.
"""
from __future__ import annotations

MAX_VOXELS = 2 ** 31 - 1  # grid and alpha-mask voxels (the kernels' int32 indices)
MAX_COMPONENTS = 4096  # per axis, density or appearance
MAX_IMPORTANCE_SAMPLES = 4096  # samples per ray of an unbounded model's second pass
MAX_WIDTH = 65536  # app_dim, featureC
MAX_ENCODING_FREQUENCIES = 64  # pos_pe, view_pe, fea_pe
