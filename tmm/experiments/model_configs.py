"""The models an experiment compares: zoo configs read by name or path and
fitted to the task (its vocabulary and sequence length)."""
from __future__ import annotations

import json
from pathlib import Path

import tmm.models

from .errors import SettingsError

__all__ = ["read_config", "fit_to_task", "labels_for", "config_names"]


def config_names(archs: str, configs=None, suffix: str = "cpu-small") -> list:
    """``configs`` (names or JSON paths) when given, else ``<arch>-<suffix>``
    for each arch of the comma-separated ``archs``."""
    names = list(configs) if configs else [f"{a.strip()}-{suffix}" for a in archs.split(",") if a.strip()]
    if not names:
        raise SettingsError("no architectures given (--archs or --configs)")
    return names


def read_config(name_or_path) -> tuple:
    """(config dict, short name) of a config name in models/ or a JSON path."""
    path = Path(name_or_path)
    if not path.is_file():
        try:
            path = tmm.models.config_path(str(name_or_path))
        except FileNotFoundError as e:
            raise SettingsError(f"no config file or name '{name_or_path}': {e}") from None
    with open(path) as f:
        cfg = json.load(f)
    if not isinstance(cfg, dict) or "arch" not in cfg:
        raise SettingsError(f"{path} is not a model config (a JSON object with \"arch\")")
    return cfg, path.stem


def fit_to_task(cfg: dict, task, max_len: str = "task") -> dict:
    """A copy of ``cfg`` with the task's ``vocab_size`` and, with ``max_len``
    "task", the task's sequence length as ``max_len`` ("config": the config's
    own when it is long enough). For TMM, max_len is the Toeplitz length, so
    its parameter count depends on it."""
    if max_len not in ("task", "config"):
        raise SettingsError(f"--max-len must be 'task' or 'config', got {max_len!r}")
    cfg = dict(cfg)
    cfg["vocab_size"] = int(task.vocab_size)
    if max_len == "task" or int(cfg.get("max_len", 0)) < task.seq_len:
        cfg["max_len"] = int(task.seq_len)
    return cfg


def labels_for(configs: list) -> list:
    """A label per (config, short name): the arch, or the short name where
    two configs share an arch."""
    archs = [cfg["arch"] for cfg, _ in configs]
    return [cfg["arch"] if archs.count(cfg["arch"]) == 1 else short for cfg, short in configs]
