"""Base class of every config section: camelCase keys in YAML, snake_case in Python, frozen, strict keys."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ConfigModel(BaseModel):
    """A config section or sub-object.

    `extra="forbid"` turns a misspelt key into an error instead of a silently ignored setting;
    `frozen` because config is read once and then only passed around. The docstring under each field is
    its documentation; scripts/config_reference.py reads it from the source (pydantic's
    `use_attribute_docstrings` would parse every model's source on each run of the program).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        str_strip_whitespace=True,
    )
