"""Reading and writing the files of a HF model directory: config.json and
the weights, in one model.safetensors or in shards listed by
model.safetensors.index.json (``{"weight_map": {name: shard file}}``).
Every file is written atomically (tmm.files; the safetensors writer of
tmm.io is atomic too)."""
import json
from pathlib import Path

from .. import files
from ..io import safetensors

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
TOKENIZER = "tokenizer.json"


def model_dir(path):
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"tmm.hf: '{path}' is not a directory (expected a local HF model directory holding "
                                f"{CONFIG} and {WEIGHTS} or {INDEX}; tmm.hf reads no hub)")
    return path


def read_config(path):
    """config.json of ``path`` as a dict."""
    file = model_dir(path) / CONFIG
    if not file.is_file():
        raise FileNotFoundError(f"tmm.hf: '{path}' has no {CONFIG}")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"tmm.hf: '{file}' is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"tmm.hf: '{file}' holds a JSON {type(raw).__name__}, expected an object")
    return raw


def read_weights(path):
    """{name: CPU tensor} of ``path``: model.safetensors, or every shard of
    model.safetensors.index.json, each shard holding exactly the names the
    index gives it."""
    path = model_dir(path)
    if (path / WEIGHTS).is_file():
        return safetensors.load_file(path / WEIGHTS)[0]
    if not (path / INDEX).is_file():
        present = ", ".join(sorted(p.name for p in path.iterdir())) or "nothing"
        raise FileNotFoundError(f"tmm.hf: '{path}' has neither {WEIGHTS} nor {INDEX} (it holds {present}; "
                                "pytorch_model.bin checkpoints are not read: convert them to safetensors)")
    try:
        weight_map = json.loads((path / INDEX).read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"tmm.hf: '{path / INDEX}' is not a safetensors index with a weight_map: {e!r}") from None
    shards = {}
    for name, shard in weight_map.items():
        shards.setdefault(shard, set()).add(name)
    tensors = {}
    for shard, names in sorted(shards.items()):
        file = path / shard
        if Path(shard).name != shard or not file.is_file():
            raise FileNotFoundError(
                f"tmm.hf: '{path / INDEX}' names the shard '{shard}', which is not a file in '{path}'")
        held = safetensors.load_file(file)[0]
        if set(held) != names:
            missing, extra = sorted(names - set(held)), sorted(set(held) - names)
            raise ValueError(f"tmm.hf: shard '{file}' disagrees with {INDEX}: missing {missing}, unlisted {extra}")
        tensors.update(held)
    return tensors


def write(path, config_text, tensors, metadata, tokenizer=None):
    """Writes the weights, then the tokenizer, then config.json (last: a
    config.json means the directory is complete)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {name: t.detach().contiguous() for name, t in tensors.items()}
    safetensors.save_file(tensors, path / WEIGHTS, metadata)
    stale = path / INDEX  # from a sharded checkpoint written here before: it would describe other files
    if stale.exists():
        stale.unlink()
    if tokenizer is not None:
        files.atomic_write_text(path / TOKENIZER, tokenizer_text(tokenizer))
    files.atomic_write_text(path / CONFIG, config_text)


def tokenizer_text(tokenizer):
    """The tokenizer.json text of a path to one or a ``tokenizers.Tokenizer``."""
    if hasattr(tokenizer, "to_str"):
        return tokenizer.to_str()
    file = Path(tokenizer)
    if not file.is_file():
        raise FileNotFoundError(
            f"tokenizer: expected a tokenizer.json path or a tokenizers.Tokenizer, got '{tokenizer}'")
    return file.read_text(encoding="utf-8")
