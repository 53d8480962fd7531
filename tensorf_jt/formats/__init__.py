"""Files on disk: our checkpoints, the PyTorch TensoRF's (read and written without torch), and
atomic writes with the permissions a plain ``open`` would give."""
