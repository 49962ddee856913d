"""The models the claims compare: a zoo config with a few keys changed,
under the label the tables use. Every model is the zoo's faithful default
(docs/models.md) unless its overrides say otherwise."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tmm.files import atomic_write_json
from ..model_configs import read_config

__all__ = ["ModelSpec", "copy_models", "width_models", "lm_models", "ablation_models", "write_configs"]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    label: str  # the name in tables and plots (and the config file's stem)
    base: str  # a zoo config name (models/<base>.json)
    overrides: tuple = ()  # (key, value) pairs applied on top

    def config(self) -> dict:
        cfg, _ = read_config(self.base)
        cfg.update(dict(self.overrides))
        return cfg


def _sized(label, base, d, layers, **extra):
    return ModelSpec(label, base, tuple(sorted({"d_model": d, "n_layers": layers, **extra}.items())))


def copy_models(d: int, layers: int, names=None) -> list:
    """The copy claim's models at width d: TMM with 4 heads and flat, the
    baselines (Hyena also with safari's associative-recall filter settings,
    ``hyena-ar``), TMM frozen (flat and 4 heads)."""
    specs = [
        _sized("tmm", "tmm-cpu-small", d, layers),
        _sized("tmm-flat", "ablation/tmm-flat", d, layers),
        _sized("transformer", "transformer-cpu-small", d, layers),
        _sized("hyena", "hyena-cpu-small", d, layers),
        _sized("hyena-ar", "hyena-assoc-recall", d, layers),
        _sized("mamba2", "mamba2-cpu-small", d, layers, headdim=min(32, 2 * d)),
        _sized("tmm-frozen-flat", "ablation/tmm-frozen-flat", d, layers),
        _sized("tmm-frozen", "ablation/tmm-frozen", d, layers),
    ]
    if names is not None:
        specs = [s for s in specs if s.label in names]
    return specs


def width_models(ratio: int, hyena_d: int, narrow_layers: int, layers: int) -> list:
    """The width claim's pair: a flat TMM of d = hyena_d / ratio with
    ``narrow_layers`` layers, and Hyena at hyena_d with ``layers``."""
    narrow = max(hyena_d // ratio, 1)
    return [_sized(f"tmm-flat-d{narrow}", "ablation/tmm-flat", narrow, narrow_layers),
            _sized(f"hyena-d{hyena_d}", "hyena-cpu-small", hyena_d, layers)]


def lm_models(d: int, seq_len: int, names=None) -> list:
    """The language-model claim's models: the ``*-cpu-small`` configs (matched
    by parameter count at d 128), the Transformer also with the zoo's softmax
    sliding window of half the context (the nearest stand-in for the authors'
    windowed linear attention: their window 256 at context 512), TMM also
    with the opt-in final norm (an extension, labelled as such)."""
    keep = {"d_model": d}
    specs = [
        ModelSpec("tmm", "tmm-cpu-small", tuple(keep.items())),
        ModelSpec("tmm+final-norm", "tmm-cpu-small", tuple({**keep, "final_norm": True}.items())),
        ModelSpec("transformer", "transformer-cpu-small", tuple(keep.items())),
        ModelSpec("transformer-window", "transformer-cpu-small",
                  tuple(sorted({**keep, "window": max(1, seq_len // 2)}.items()))),
        ModelSpec("hyena", "hyena-cpu-small", tuple(keep.items())),
        ModelSpec("mamba2", "mamba2-cpu-small", tuple(keep.items())),
    ]
    return specs if names is None else [m for m in specs if m.label in names]


def ablation_models(d: int, layers: int) -> list:
    """The ablation's TMM variants (claim 4): heads 1 / 4 / 16, kernel width
    1 / 4 / 8 (flat), expanded without dropout (as every other variant) and
    with the authors' mixer dropout 0.1, masked."""
    def v(label, base, **extra):
        return _sized(label, base, d, layers, **extra)

    return [
        v("heads1", "tmm-cpu-small", heads=1),
        v("heads4", "tmm-cpu-small", heads=4),
        v("heads16", "tmm-cpu-small", heads=min(16, d)),
        v("flat-kernel1", "ablation/tmm-flat"),
        v("flat-kernel4", "ablation/tmm-flat", kernel=4),
        v("flat-kernel8", "ablation/tmm-kernel8-flat"),
        v("expanded", "ablation/tmm-expanded", mixer_dropout=0.0),
        v("expanded-dropout0.1", "ablation/tmm-expanded", mixer_dropout=0.1),
        v("masked", "ablation/tmm-masked"),
    ]


def write_configs(folder: Path, specs: list) -> list:
    """Each spec's config as ``folder/<label>.json`` (atomically); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in specs:
        path = folder / f"{spec.label}.json"
        cfg = spec.config()
        if not path.is_file() or json.loads(path.read_text()) != cfg:
            atomic_write_json(path, cfg)
        paths.append(str(path))
    return paths
