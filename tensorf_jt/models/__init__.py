"""Radiance-field models. ``MODELS`` maps the reference's ``model_name`` values to classes."""
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.models.tensor_cp import TensorCP
from tensorf_jt.models.tensor_vm import TensorVMSplit
from tensorf_jt.models.tensor_vm_stacked import TensorVM

MODELS = {"TensorVMSplit": TensorVMSplit, "TensorVM": TensorVM, "TensorCP": TensorCP}

__all__ = ["MODELS", "TensorBase", "TensorCP", "TensorVM", "TensorVMSplit"]
