"""Typed, validated stack configuration: one pydantic model per `gpu-eks:*` section (`config.stack` has
the whole `StackConfig` and its loader; `config.errors` the key-naming error messages)."""
