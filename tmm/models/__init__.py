"""The model zoo (TMM, Transformer, Hyena, Mamba2), written once in C++ and
used from Python as ``torch.nn.Module`` instances acting on the C++ module's
own tensors.

    model = tmm.models.build("tmm-tiny")          # a name in the repo's models/
    model = tmm.models.build("my/config.json")    # a JSON file
    model = tmm.models.build({"arch": "tmm", ...})
    logits = model(input_ids)                      # B x L int64 -> B x L x V
    out = model(input_ids, labels=labels, return_hidden=True)  # .logits .hidden .loss
    model.save("ckpt/")                            # config.json + model.safetensors
    model = tmm.models.load("ckpt/")

Checkpoints are the directories C++ writes and reads
(tmm::models::save_checkpoint / load_checkpoint), with the same tensor names.
"""
import json
import os
from pathlib import Path

from .. import _C
from ._mirror import CppModuleList, CppNode, LanguageModel, LMOutput


def models_dir():
    """The folder of the zoo's JSON configs in a source checkout (the repo's
    models/), or None for an installed package (pass a path to build then)."""
    root = Path(__file__).resolve().parent.parent.parent
    if (root / "models").is_dir() and (root / "CMakeLists.txt").is_file():
        return root / "models"
    return None


def list_configs(folder=None):
    """Names of the configs in ``folder`` (default :func:`models_dir`), e.g.
    ["tmm-cpu-small", "tmm-paper", "tmm-tiny", ...]."""
    folder = Path(folder) if folder is not None else models_dir()
    if folder is None:
        return []
    return sorted(p.stem for p in folder.glob("*.json"))


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
    is_name = isinstance(config_or_path, str) and os.sep not in config_or_path and not config_or_path.endswith(".json")
    if is_name and not path.is_file():
        folder = models_dir()
        if folder is None:
            raise FileNotFoundError(
                f"build: '{config_or_path}' is not a file, and config names are looked up only in a source "
                "checkout's models/ folder; pass the path of a JSON config"
            )
        path = folder / f"{config_or_path}.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"build: no config named '{config_or_path}' in {folder} (known: {', '.join(list_configs())})"
            )
    if not path.is_file():
        raise FileNotFoundError(f"build: no such config file: '{path}'")
    return path.read_text(), str(path)


def build(config_or_path):
    """An untrained model from a config: a dict, JSON text, the path of a JSON
    file, or the name of one of the zoo's configs (``list_configs()``).
    An unknown, missing, mistyped or impossible key is an error naming it."""
    text, where = _config_text(config_or_path)
    try:
        cpp = _C._build_model(text)
    except RuntimeError as e:
        if where == "config":
            raise
        raise RuntimeError(f"{where}: {e}") from None
    return LanguageModel(cpp)


def load(checkpoint_dir, device=None, dtype=None):
    """The model saved in ``checkpoint_dir`` (config.json + model.safetensors,
    by ``model.save`` or C++ ``save_checkpoint``). The whole file is checked
    against the config before anything is copied. The model comes in float32
    on the CPU unless ``device`` / ``dtype`` say otherwise."""
    model = LanguageModel(_C._load_checkpoint(os.fspath(checkpoint_dir)))
    if device is not None or dtype is not None:
        model.to(device=device, dtype=dtype)
    return model


__all__ = [
    "LanguageModel",
    "LMOutput",
    "CppNode",
    "CppModuleList",
    "build",
    "load",
    "list_configs",
    "architectures",
    "models_dir",
]
