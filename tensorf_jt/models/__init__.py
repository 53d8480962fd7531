"""Radiance-field models. ``MODELS`` maps the reference's ``model_name`` values to classes."""
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.models.tensor_vm import TensorVMSplit

MODELS = {"TensorVMSplit": TensorVMSplit}

__all__ = ["MODELS", "TensorBase", "TensorVMSplit"]
