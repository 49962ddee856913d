"""Training recipes for scripts/compare.py ``--recipe NAME``: the settings a
paper trained with, filled in for every flag the command leaves at
compare's default, and an estimate of what the run will cost, printed before
it starts (``--dry-run``: the estimate only).

    python scripts/compare.py --recipe paper --task-option path=shards/ --device cuda --out results/paper
    torchrun --nproc_per_node 8 scripts/compare.py --recipe paper --task-option path=shards/ --device cuda ...
    python scripts/compare.py --recipe paper --task-option path=shards/ --dry-run      # the estimate, then exit

``paper`` (the TMM authors' runs): the zoo's ``*-paper`` configs
(TMM 4 heads d 1024, Transformer, Hyena, Mamba2; 19-184 M parameters at
an 8k vocabulary), token shards (``--task shards``; an 8k BPE is
``scripts/prepare_corpus.py --tokenizer bpe --vocab 8192``) in windows of
512 tokens, global batch 128, AdamW at lr 5e-4 with 500 warm-up steps and a
linear decay to 0, gradient clipping at 1.0, 200,000 steps (13.1 B tokens
per model), a checkpoint every 1,000 steps, and bfloat16 autocast on a GPU.
What the authors did not state is tmm's default (weight decay 0.1 on
matrices, betas 0.9 / 0.95, seed 0).

The estimate (:func:`estimate`): each model's step is timed as the run will
take it (this process's rows of the global batch, in its micro-batches, at
its precision, on its device: the median of 3 steps after one untimed),
times the steps; the gradient reduction between processes is not in it, so
with several processes it is a lower bound. Tokens are steps x batch x
sequence length; FLOPs the training estimate of tmm.train.flops_per_token.
"""
from __future__ import annotations

import dataclasses

from .errors import SettingsError

__all__ = ["RECIPES", "apply_recipe", "estimate", "format_estimate"]

RECIPES = {
    "paper": {
        "settings": {
            "task": "shards",
            "configs": ["tmm-paper", "transformer-paper", "hyena-paper", "mamba2-paper"],
            "steps": 200_000,
            "batch_size": 128,
            "lr": 5e-4,
            "warmup": 500,
            "min_lr_ratio": 0.0,
            "checkpoint_every": 1000,
            "eval_every": 5000,
        },
        "task_options": {"seq_len": 512},
        "gpu_precision": "bfloat16",
    },
}


def apply_recipe(s):
    """``s`` (CompareSettings) with the recipe's value for every setting still at compare's default."""
    if s.recipe not in RECIPES:
        raise SettingsError(f"--recipe must be one of {', '.join(RECIPES)}, got {s.recipe!r}")
    recipe = RECIPES[s.recipe]
    defaults = type(s)()  # compare's defaults, without importing compare (which imports this module)
    changes = {}
    for key, value in recipe["settings"].items():
        if getattr(s, key) == getattr(defaults, key):
            changes[key] = list(value) if isinstance(value, list) else value
    if recipe.get("gpu_precision") and s.device == "cuda" and s.precision == defaults.precision:
        changes["precision"] = recipe["gpu_precision"]
    s = dataclasses.replace(s, **changes)
    if s.task != "shards":
        raise SettingsError(f"--recipe {s.recipe} trains on token shards (--task shards), not --task {s.task}")
    given = {item.split("=", 1)[0] for item in s.task_option}
    if "path" not in given:
        raise SettingsError(f"--recipe {s.recipe} needs the token shards: --task-option path=DIR "
                            "(scripts/prepare_corpus.py --out DIR --tokenizer bpe --vocab 8192)")
    s.task_option = list(s.task_option) + [f"{k}={v}" for k, v in recipe["task_options"].items() if k not in given]
    return s


def estimate(runs, task, settings, device, world):
    """One dict per run: label, params, step_s (measured), steps, total_s, tokens, flops; on the devices present."""
    from tmm.train import flops_per_token

    from .budget import time_steps

    out = []
    for r in runs:
        step_s = time_steps(r["config"], task, settings.batch_size, settings.seed, device=device,
                            grad_accum=settings.grad_accum, world=world, precision=settings.precision)
        tokens = settings.steps * settings.batch_size * task.seq_len
        out.append({"label": r["label"], "config": r["config_name"], "params": r["params"], "step_s": step_s,
                    "steps": settings.steps, "total_s": step_s * settings.steps, "tokens": tokens,
                    "flops": flops_per_token(r["config"], r["params"], task.seq_len) * tokens})
    return out


def _duration(seconds):
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min"


def format_estimate(rows, settings, device_name, world, seq_len):
    """The estimate as lines of text."""
    lines = [f"estimate on {world} x {device_name} ({settings.precision}, global batch {settings.batch_size} x "
             f"{seq_len} tokens, {settings.grad_accum} micro-batch(es) per process, {settings.steps:,} steps), "
             "from a measured step:"]
    for r in rows:
        lines.append(f"  {r['label']:<14} {r['params']:>12,} params  {r['step_s'] * 1000:9.1f} ms/step  "
                     f"total {_duration(r['total_s']):>9}  {r['tokens'] / 1e9:6.2f} B tokens  "
                     f"{r['flops'] / 1e18:8.1f} EFLOP")
    total_s = sum(r["total_s"] for r in rows)
    tokens = sum(r["tokens"] for r in rows)
    lines.append(f"  all {len(rows)} models: {_duration(total_s)} of training (evaluation and checkpoints not "
                 f"included), {tokens / 1e9:.2f} B tokens consumed")
    return lines
