"""Errors a user can act on. The CLIs print their message and exit with status 2, no traceback."""


class TensorfError(Exception):
    """Base class: the message says what was wrong and what to do about it."""


class ConfigError(TensorfError):
    """A flag or config-file value is missing, unknown or out of range."""


class DatasetError(TensorfError):
    """A dataset folder is missing, incomplete or malformed."""


class CheckpointError(TensorfError):
    """A checkpoint file cannot be read or does not describe a model we can rebuild."""


class OutputConflict(TensorfError):
    """An output would replace or remove a file (or fill a folder) that tensorf_jt did not write."""
