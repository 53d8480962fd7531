"""The browser viewer (viser): a checkpoint (``view.py``) or a training run (``--viewer 1``) seen
from the browser's camera, frames rendered by the thread that owns the model."""
