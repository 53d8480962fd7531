"""Settings of a run: the reference's flags and config files (``flags``), typed and validated
once into a ``RunConfig`` (``run_config``), which is all the rest of the package reads."""
from __future__ import annotations

from tensorf_jt.config.flags import DEMO_CONFIG, config_parser, parse_flags
from tensorf_jt.config.run_config import (DataConfig, ModelConfig, OutputConfig, RenderConfig, RunConfig,
                                          RuntimeConfig, ScheduleConfig, require_for_rendering,
                                          require_for_training, resumed)


def parse_run_config(argv: list[str] | None = None) -> tuple[RunConfig, set[str]]:
    """Parse flags and config file into a validated ``RunConfig``; also return the names set
    explicitly (on the command line or in the config file)."""
    flags, explicit = parse_flags(argv)
    return RunConfig.from_flags(flags), explicit


def load_run_config(argv: list[str] | None = None) -> RunConfig:
    """``parse_run_config`` without the explicit names."""
    return parse_run_config(argv)[0]


__all__ = ["DEMO_CONFIG", "DataConfig", "ModelConfig", "OutputConfig", "RenderConfig", "RunConfig", "RuntimeConfig",
           "ScheduleConfig", "config_parser", "load_run_config", "parse_flags", "parse_run_config",
           "require_for_rendering", "require_for_training", "resumed"]
