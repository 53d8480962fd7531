"""TensoRF (Tensorial Radiance Fields, Chen et al., ECCV 2022) implemented natively in Jittor."""
from tensorf_jt.bootstrap import import_jittor

import_jittor()

__version__ = "0.1.0"
