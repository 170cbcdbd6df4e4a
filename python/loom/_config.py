"""LLM(config=...) as loom.toml text: a path, the text itself, or a dict of sections."""
from __future__ import annotations

import json
import os
from typing import Union


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is JSON's string syntax for what we write
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"config value {v!r}: use a bool, number, string or list")


def _table(name: str, table: dict, out: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in table.items() if isinstance(v, dict)}
    if scalars or not nested:
        out.append(f"[{name}]")
        out.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
    for k, v in nested.items():
        _table(f"{name}.{k}", v, out)


def config_toml(config: Union[str, dict, None]) -> str:
    if config is None:
        return ""
    if isinstance(config, dict):
        out: list[str] = []
        for section, table in config.items():
            if not isinstance(table, dict):
                raise TypeError(f"config[{section!r}]: each section is a dict, as a [section] of loom.toml")
            _table(section, table, out)
        return "\n".join(out) + "\n"
    if os.path.exists(config):
        with open(config, encoding="utf-8") as f:
            return f.read()
    if "=" in config or "[" in config:
        return config
    raise FileNotFoundError(f"config {config!r}: no such file (give a loom.toml path, its text, or a dict)")
