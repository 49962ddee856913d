"""The model zoo (TMM, Transformer, Hyena, Mamba2): plain nn.Module trees
(tmm.models.zoo), configured, validated and initialised by the C++ library,
whose checkpoints, decoding and generation they share (docs/models.md).

    model = tmm.models.build("tmm-tiny")          # a zoo config name, a JSON path or a dict
    loss = model(input_ids, labels=input_ids).loss # next-token prediction
    model.save("ckpt/")                            # config.json + model.safetensors, loadable from C++
    model = tmm.models.load("ckpt/")
"""
import json
import os
from pathlib import Path

from .. import _C
from ..nn.outputs import LMOutput
from .zoo import ARCHITECTURES, Hyena, Mamba2, Transformer, TMM, ZooModel, from_cpp, save_checkpoint


def models_dir():
    """The folder of the zoo's JSON configs: the package's ``configs/``, its
    package data (in a source checkout a link to the repository's models/);
    None if it is missing (an install that lost its data files)."""
    folder = Path(__file__).resolve().parent.parent / "configs"
    return folder if folder.is_dir() else None


def list_configs(folder=None):
    """Names of the configs in ``folder`` (default: the zoo, :func:`models_dir`),
    sub-folders included: ["hyena-cpu-small", ..., "tmm-tiny", ...,
    "ablation/tmm-expanded", ...]. Each is a name :func:`config_path` and
    :func:`build` accept."""
    folder = Path(folder) if folder is not None else models_dir()
    if folder is None:
        return []
    top = sorted(p.stem for p in folder.glob("*.json"))
    nested = sorted(p.relative_to(folder).with_suffix("").as_posix() for p in folder.glob("*/**/*.json"))
    return top + nested


def config_path(name):
    """The JSON file of the zoo's config ``name`` (one of :func:`list_configs`,
    e.g. "tmm-tiny" or "ablation/tmm-flat"): the one place a config name
    becomes a path, in a source checkout and in an installed package alike."""
    if not isinstance(name, str):
        raise TypeError(f"config_path: expected a config name (str), got {type(name).__name__}")
    folder = models_dir()
    if folder is None:
        raise FileNotFoundError(
            f"config_path: no folder of configs to look '{name}' up in: {Path(__file__).parent.parent / 'configs'} "
            "is missing; reinstall tmm"
        )
    known = list_configs(folder)
    if name not in known:
        raise FileNotFoundError(f"config_path: no config named '{name}' in {folder} (known: {', '.join(known)})")
    return folder / f"{name}.json"


def architectures():
    """The "arch" values the C++ library knows."""
    return list(_C._architectures())


def _config_text(config_or_path):
    """(JSON text, where it came from) for build()."""
    if isinstance(config_or_path, dict):
        return json.dumps(config_or_path), "config"
    if isinstance(config_or_path, str) and config_or_path.lstrip().startswith("{"):
        return config_or_path, "config"
    if not isinstance(config_or_path, (str, os.PathLike)):
        raise TypeError(
            f"build: expected a config dict, a JSON file path or a config name, got {type(config_or_path).__name__}"
        )
    path = Path(config_or_path)
    if not path.is_file():
        looks_like_name = isinstance(config_or_path, str) and not config_or_path.endswith(".json")
        if not looks_like_name:
            raise FileNotFoundError(f"build: no such config file: '{path}'")
        try:
            path = config_path(config_or_path)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"build: '{config_or_path}' is not a file; as a config name: {e}") from None
    return path.read_text(), str(path)


def build(config_or_path):
    """An untrained model from a config: a dict, JSON text, the path of a JSON
    file, or the name of one of the zoo's configs (``list_configs()``).
    An unknown, missing, mistyped or impossible key is an error naming it.
    Its initial values are the C++ model's (the same draws from torch's
    global generator as a C++ program's)."""
    text, where = _config_text(config_or_path)
    try:
        cpp = _C._build_model(text)
    except RuntimeError as e:
        if where == "config":
            raise
        raise RuntimeError(f"{where}: {e}") from None
    return from_cpp(cpp, cpp.config_json())


def load(checkpoint_dir, device=None, dtype=None):
    """The model saved in ``checkpoint_dir`` (config.json + model.safetensors,
    by ``model.save`` or C++ ``save_checkpoint``). The whole file is checked
    against the config before anything is read into the model, which comes
    in float32 on the CPU unless ``device`` / ``dtype`` say otherwise. A
    distillation saved beside it (tmm.distill.save) is attached
    (``method="distilled"``)."""
    path = os.fspath(checkpoint_dir)
    cpp = _C._load_checkpoint(path)
    model = from_cpp(cpp, cpp.config_json())
    if _C._has_distillation(path):
        model._distillation = _C._load_distillation(path)
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    return model


__all__ = ["ZooModel", "TMM", "Transformer", "Hyena", "Mamba2", "ARCHITECTURES", "LMOutput", "build", "load",
           "save_checkpoint",
           "list_configs", "config_path", "architectures", "models_dir"]
