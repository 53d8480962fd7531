"""Starting a training run, or continuing a saved one (``--resume``)."""
from __future__ import annotations

import os

from tensorf_jt.config import RunConfig, resumed
from tensorf_jt.config.flags import check_saved_flags
from tensorf_jt.errors import ConfigError, OutputConflict
from tensorf_jt.formats.ownership import claim_folder, same_file
from tensorf_jt.training.log import is_run_folder
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


def check_new_run_outputs(config: RunConfig) -> None:
    """Refuse a new run whose folder holds files another program wrote (a PyTorch TensoRF run of
    the same name, say), or whose checkpoint would replace the ``--ckpt`` it starts from."""
    if config.output.add_timestamp:
        return
    folder = config.output.run_folder()
    remedy = "Give another --expname or --basedir."
    claim_folder(folder, is_run_folder, "a training run", remedy)
    checkpoint = os.path.join(folder, f"{config.output.expname}.th")
    if config.model.ckpt and same_file(config.model.ckpt, checkpoint):
        raise OutputConflict(f"--ckpt '{config.model.ckpt}' is the checkpoint this run would write at its end, "
                             f"replacing the model it starts from. {remedy}")


def train(config: RunConfig, explicit: set[str] = frozenset()) -> TrainResult:
    """Train as ``config`` says; with ``resume`` set, continue the saved run instead.

    ``explicit``: the flags set on the command line or in the config file (see
    ``config.parse_run_config``); when resuming, the others come from the saved run.
    """
    if not config.output.resume:
        check_new_run_outputs(config)
        return Trainer(config).run()
    if config.model.ckpt:
        raise ConfigError("--ckpt starts a new run from a model, --resume continues a saved run: give only one.")
    path = resume_path(config)
    if path is None:
        print(f"--resume auto: no saved state of '{config.output.expname}' under '{config.output.basedir}' yet; "
              "starting a new run.")
        check_new_run_outputs(config)
        return Trainer(config).run()
    state = read_state(path)
    check_saved_flags(state["train_args"], f"Training state '{path}'")
    return Trainer(resumed(config, set(explicit), state["train_args"]), state=state,
                   logfolder=os.path.dirname(os.path.abspath(path))).run()
