"""Starting a training run, or continuing a saved one (``--resume``)."""
from __future__ import annotations

import os

from tensorf_jt.config import RunConfig, resumed
from tensorf_jt.config.flags import check_saved_flags
from tensorf_jt.errors import ConfigError
from tensorf_jt.training.state import find_latest_state, read_state
from tensorf_jt.training.trainer import Trainer, TrainResult


def resume_path(config: RunConfig) -> str | None:
    """The state file ``--resume`` names; for ``auto`` the newest of this run (None: there is none yet)."""
    output = config.output
    if output.resume != "auto":
        return output.resume
    if not output.expname:
        raise ConfigError("--resume auto looks for the run by its expname: give --config or --expname too.")
    return find_latest_state(output.basedir, output.expname)


def train(config: RunConfig, explicit: set[str] = frozenset()) -> TrainResult:
    """Train as ``config`` says; with ``resume`` set, continue the saved run instead.

    ``explicit``: the flags set on the command line or in the config file (see
    ``config.parse_run_config``); when resuming, the others come from the saved run.
    """
    if not config.output.resume:
        return Trainer(config).run()
    if config.model.ckpt:
        raise ConfigError("--ckpt starts a new run from a model, --resume continues a saved run: give only one.")
    path = resume_path(config)
    if path is None:
        print(f"--resume auto: no saved state of '{config.output.expname}' under '{config.output.basedir}' yet; "
              "starting a new run.")
        return Trainer(config).run()
    state = read_state(path)
    check_saved_flags(state["train_args"], f"Training state '{path}'")
    return Trainer(resumed(config, set(explicit), state["train_args"]), state=state,
                   logfolder=os.path.dirname(os.path.abspath(path))).run()
