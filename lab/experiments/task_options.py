"""Task options given on a command line as KEY=VALUE."""
from __future__ import annotations

import json

from .errors import SettingsError

__all__ = ["parse_task_options"]


def parse_task_options(items) -> dict:
    """{KEY: VALUE} of "KEY=VALUE" strings, VALUE parsed as JSON when it can
    be (4096, 0.1, true, null), else kept as a string (the task converts
    strings to its options' types)."""
    opts = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SettingsError(f"--task-option expects KEY=VALUE, got '{item}'")
        try:
            opts[key] = json.loads(value)
        except json.JSONDecodeError:
            opts[key] = value
    return opts
