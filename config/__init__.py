"""Typed, validated stack configuration (one pydantic model per `gpu-eks:*` section)."""

from config.errors import ConfigError, ConfigProblem
from config.stack import StackConfig, load_stack_config, parse_stack_config

__all__ = ["ConfigError", "ConfigProblem", "StackConfig", "load_stack_config", "parse_stack_config"]
