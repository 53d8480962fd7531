"""Radiance-field models: the fields (``MODELS`` maps the reference's ``model_name`` values to
them), the model that renders a field through a sampler, and the factory that builds it."""
from tensorf_jt.models.factory import MODELS, compose
from tensorf_jt.models.tensor_base import TensorBase
from tensorf_jt.models.tensor_cp import TensorCP
from tensorf_jt.models.tensor_vm import TensorVMSplit
from tensorf_jt.models.tensor_vm_stacked import TensorVM
from tensorf_jt.models.tensorf_model import TensoRFModel

__all__ = ["MODELS", "TensoRFModel", "TensorBase", "TensorCP", "TensorVM", "TensorVMSplit", "compose"]
