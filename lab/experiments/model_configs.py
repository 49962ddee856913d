"""The models an experiment compares: zoo configs read by name or path and
fitted to the task (its vocabulary and sequence length), and the TMM
ablation's variants (``models/ablation/tmm-<variant>.json``: the
``tmm-cpu-small`` block with one change of the mixer)."""
from __future__ import annotations

import json
from pathlib import Path

import tmm.models

from .errors import SettingsError

__all__ = ["read_config", "fit_to_task", "labels_for", "config_names", "build_model", "mixer_config",
           "ABLATION_VARIANTS", "ablation_variants", "ablation_configs"]

# The documented variants, in the order of docs/experiments.md; any other
# file in models/ablation/ is a variant too (by its name without "tmm-").
ABLATION_VARIANTS = ("heads4", "flat", "heads16", "kernel8", "expanded", "frozen", "masked")


def config_names(archs: str, configs=None, suffix: str = "cpu-small") -> list:
    """``configs`` (names or JSON paths) when given, else ``<arch>-<suffix>``
    for each arch of the comma-separated ``archs``."""
    names = list(configs) if configs else [f"{a.strip()}-{suffix}" for a in archs.split(",") if a.strip()]
    if not names:
        raise SettingsError("no architectures given (--archs or --configs)")
    return names


_ABLATION = "ablation/tmm-"  # the zoo's config names of the ablation variants: ablation/tmm-<variant>


def ablation_variants() -> list:
    """The variants the zoo's ablation/ configs hold: the documented ones first, in their order, then the others."""
    found = sorted(name[len(_ABLATION):] for name in tmm.models.list_configs() if name.startswith(_ABLATION))
    return [v for v in ABLATION_VARIANTS if v in found] + [v for v in found if v not in ABLATION_VARIANTS]


def ablation_configs(variants=None) -> list:
    """The config paths of ``variants`` (names, a comma-separated string, or
    None / "all": :data:`ABLATION_VARIANTS`)."""
    if variants is None or variants == "all":
        variants = ABLATION_VARIANTS
    elif isinstance(variants, str):
        variants = [v.strip() for v in variants.split(",") if v.strip()]
    have = ablation_variants()
    unknown = [v for v in variants if v not in have]
    if unknown or not variants:
        raise SettingsError(f"--ablation: no variant {', '.join(unknown) or '(none given)'} in the zoo's "
                            f"ablation/ configs (variants: {', '.join(have) or 'none'})")
    return [str(tmm.models.config_path(_ABLATION + v)) for v in variants]


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
    archs = [_label(cfg) for cfg, _ in configs]
    return [_label(cfg) if archs.count(_label(cfg)) == 1 else short for cfg, short in configs]


def _label(cfg: dict) -> str:
    """The arch; for a user's mixer (arch "mixer"), the mixer's name."""
    return str(cfg["mixer"]).replace(":", ".").rsplit(".", 1)[-1] if cfg["arch"] == "mixer" else cfg["arch"]


# The block options a user's mixer takes from the skeleton config (--mixer-base).
_SKELETON_KEYS = ("d_model", "n_layers", "max_len", "vocab_size", "ffn_mult", "activation", "block_order", "norm",
                  "dropout", "tie_embeddings", "final_norm")
# A TMM base's init (kaiming | scaled) is the skeleton's too; other archs' inits are their own.
_SKELETON_INIT_ARCHS = ("tmm",)


def mixer_config(mixer: str, mixer_kwargs: dict, base: dict, mixer_inputs=None) -> dict:
    """The config of a user's mixer (an import path) in the skeleton of the
    zoo config ``base`` (its sizes and block options; default tmm-cpu-small):
    what tmm.nn.SequenceModel.from_mixer_config builds; ``mixer_inputs``
    (None: the mixer's own) as SequenceModel's. The mixer is imported and
    mixer_inputs checked here, so that a wrong one is a SettingsError before
    anything trains."""
    from tmm.nn.sequence_model import mixer_inputs_for, resolve_mixer_factory

    try:
        factory = resolve_mixer_factory(mixer)
    except (ImportError, TypeError, ValueError) as e:
        raise SettingsError(f"--mixer: {e}") from None
    try:
        mixer_inputs_for(factory, mixer_inputs, mixer_kwargs)
    except ValueError as e:
        raise SettingsError(f"--mixer-inputs: {e}") from None
    cfg = {"arch": "mixer", "mixer": mixer, "mixer_kwargs": dict(mixer_kwargs)}
    if mixer_inputs is not None:
        cfg["mixer_inputs"] = list(mixer_inputs)
    cfg.update({k: base[k] for k in _SKELETON_KEYS if k in base})
    if base.get("arch") in _SKELETON_INIT_ARCHS and "init" in base:
        cfg["init"] = base["init"]
    return cfg


def build_model(cfg: dict):
    """The model of a config: the zoo's (tmm.models.build), or a user's mixer
    in the zoo's skeleton (arch "mixer": tmm.nn.SequenceModel)."""
    from tmm.nn import SequenceModel

    if cfg.get("arch") == "mixer":
        return SequenceModel.from_mixer_config(cfg)
    return tmm.models.build(cfg)
