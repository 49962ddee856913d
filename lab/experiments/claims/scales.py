"""The suite's sizes: one :class:`Scale` per ``--scale``.

``small`` is the 3 minute smoke version the tests run (every claim's code
path, sizes far too small for any verdict); ``quick`` is the default's
models at shorter lengths, fewer steps and one seed (its copy claim, at
n = 128, is the README's main job, under 10 minutes); ``default`` takes
this 2-core CPU about 91 hours alone (``--estimate`` times it per claim); ``paper`` is the
authors' sizes (meant for ``--device cuda``). Budgets are steps and tokens, never wall-clock: the same
scale trains the same tokens on any machine.
"""
from __future__ import annotations

import dataclasses

from ..errors import SettingsError

__all__ = ["Scale", "SCALES", "scale"]

# MQAR at default: steps of batch 64 on the first setting (docs/experiments.md, "MQAR as Zoology runs it").
# Calibrated on the suite's own Transformer job (4 pairs, 64 tokens, lr 1e-3, 6,000-step schedule): held-out
# accuracy 0.37 at step 1,200, 0.85 at 1,500, 0.94 at 1,800; 4,000 steps leave it room at the sweep's other lrs.
MQAR_DEFAULT_STEPS = 4_000


@dataclasses.dataclass(frozen=True)
class Scale:
    name: str
    seeds: tuple  # one comparison per seed
    batch_size: int
    # copy (claim 2) and its ablations (claim 4)
    copy_ns: tuple  # tokens written twice
    copy_vocab: int
    copy_d: int
    copy_layers: int
    copy_steps: int
    copy_lrs: tuple  # each model's rate: the best of a seed-0 sweep over these (grown past an edge)
    copy_lr: float  # the ablations' one rate
    copy_long_n_models: tuple  # the models copied at the longest n (all models at the others)
    width_ratio: int  # the width claim: a flat TMM with d / width_ratio of Hyena's d
    width_hyena_d: int
    width_narrow_layers: int  # the narrow TMM's depth (the authors': 8); Hyena has copy_layers
    width_lrs: tuple  # each of the pair at its best of these (copy_width)
    # language modelling (claim 1)
    lm_tokenizer: str
    lm_vocab: int
    lm_seq_len: int
    lm_d: int
    lm_max_bytes: int  # 0: the whole corpus
    lm_lrs: tuple  # the sweep
    lm_sweep_steps: int
    lm_steps: int  # equal tokens; the matched budget is TMM's FLOPs in lm_steps steps
    lm_seeds: tuple  # the matched-compute and half-budget runs
    lm_equal_seeds: tuple  # the equal-tokens runs (a second table, no verdict)
    lm_batch_size: int
    lm_eval_batches: int  # held-out batches of lm_batch_size per evaluation
    # associative recall (the project's own test, Zoology's MQAR)
    mqar_settings: tuple  # (num_kv_pairs, seq_len): the first decides whether the setting separates
    mqar_vocab: int  # keys from its lower half, values from its upper half
    mqar_d: int
    mqar_layers: int
    mqar_steps: int  # on the first setting; the others get as many tokens (fewer steps of longer sequences)
    mqar_lrs: tuple  # every architecture at every lr on the first setting: each model's best counts
    mqar_seeds: tuple  # the verdicts' models at their best lr on the first setting
    mqar_batch_size: int
    mqar_eval_batches: int  # held-out batches of mqar_batch_size per evaluation (>= 1,000 sequences at default)
    # information retention (claim 2)
    retention_n: int  # tokens per window (corpus and random)
    retention_random_vocab: int  # the capacity test's random tokens
    retention_steps: int  # every capacity autoencoder's steps (and the operator index's causal models')
    retention_extraction_steps: int  # every extraction decoder's steps
    retention_authors_layers: int  # the authors' decoder depth (they use 16)
    retention_seeds: tuple
    # ablations (claim 4)
    ablation_copy_n: int
    ablation_steps: int
    ablation_lm_steps: int
    device: str = "cpu"


SCALES = {
    "small": Scale(
        name="small", seeds=(0,), batch_size=4,
        copy_ns=(16,), copy_vocab=8, copy_d=16, copy_layers=1, copy_steps=12, copy_lrs=(3e-3,), copy_lr=3e-3,
        copy_long_n_models=("tmm", "transformer"), width_ratio=8, width_hyena_d=32,
        width_narrow_layers=2, width_lrs=(3e-3,),
        lm_tokenizer="byte", lm_vocab=256, lm_seq_len=32, lm_d=16, lm_max_bytes=600_000,
        lm_lrs=(1e-3, 3e-3), lm_sweep_steps=6, lm_steps=10, lm_seeds=(0,), lm_equal_seeds=(0,), lm_batch_size=4,
        lm_eval_batches=2,
        mqar_settings=((2, 16),), mqar_vocab=16, mqar_d=16, mqar_layers=1, mqar_steps=10, mqar_lrs=(3e-3,),
        mqar_seeds=(0,), mqar_batch_size=4, mqar_eval_batches=2,
        retention_n=8, retention_random_vocab=8, retention_steps=8, retention_extraction_steps=8,
        retention_authors_layers=1, retention_seeds=(0,),
        ablation_copy_n=16, ablation_steps=8, ablation_lm_steps=6,
    ),
    "default": Scale(
        name="default", seeds=(0, 1, 2), batch_size=8,
        copy_ns=(256, 512), copy_vocab=32, copy_d=64, copy_layers=2, copy_steps=300, copy_lrs=(1e-3, 3e-3, 1e-2),
        copy_lr=3e-3,
        copy_long_n_models=("tmm", "tmm-flat", "transformer", "hyena", "hyena-ar", "mamba2"), width_ratio=32,
        width_hyena_d=128,
        width_narrow_layers=8, width_lrs=(1e-3, 3e-3, 1e-2),
        lm_tokenizer="bpe", lm_vocab=4096, lm_seq_len=256, lm_d=128, lm_max_bytes=0,
        lm_lrs=(1e-3, 3e-3, 1e-2), lm_sweep_steps=300, lm_steps=1_500, lm_seeds=(0, 1, 2), lm_equal_seeds=(0,),
        lm_batch_size=8, lm_eval_batches=32,
        # the harder sizes, (8, 128) and (16, 256), need a budget calibrated per size: not at this scale
        mqar_settings=((4, 64),), mqar_vocab=256, mqar_d=64, mqar_layers=2,
        mqar_steps=MQAR_DEFAULT_STEPS, mqar_lrs=(3e-4, 1e-3, 3e-3), mqar_seeds=(0, 1, 2), mqar_batch_size=64,
        mqar_eval_batches=16,
        retention_n=32, retention_random_vocab=16, retention_steps=1_500, retention_extraction_steps=1_000,
        retention_authors_layers=4, retention_seeds=(0, 1, 2),
        # the ablation's LM runs at the lm claim's long-run horizon
        ablation_copy_n=256, ablation_steps=300, ablation_lm_steps=1_500,
    ),
    # The README's main job (scripts/run.sh: --only copy): one seed at n = 128, under 10 minutes on 2 cores.
    "quick": None,
    # The authors' sizes (docs/experiments.md): meant for a GPU.
    "paper": Scale(
        name="paper", seeds=(0, 1, 2), batch_size=64,
        copy_ns=(512,), copy_vocab=64, copy_d=256, copy_layers=16, copy_steps=10_000, copy_lrs=(2e-4, 5e-4, 1e-3),
        copy_lr=5e-4,
        copy_long_n_models=("tmm", "tmm-flat", "transformer", "hyena", "hyena-ar", "mamba2"), width_ratio=32,
        width_hyena_d=256,
        width_narrow_layers=8, width_lrs=(2e-4, 5e-4, 1e-3),
        lm_tokenizer="bpe", lm_vocab=8000, lm_seq_len=512, lm_d=512, lm_max_bytes=0,
        lm_lrs=(2e-4, 5e-4, 1e-3), lm_sweep_steps=2_000, lm_steps=20_000, lm_seeds=(0, 1, 2), lm_equal_seeds=(0,),
        lm_batch_size=64,
        lm_eval_batches=32,
        mqar_settings=((4, 64), (8, 128), (16, 256), (64, 512)), mqar_vocab=8192, mqar_d=128, mqar_layers=2,
        mqar_steps=20_000, mqar_lrs=(1e-4, 3e-4, 1e-3, 3e-3), mqar_seeds=(0, 1, 2), mqar_batch_size=64,
        mqar_eval_batches=16,
        retention_n=512, retention_random_vocab=16, retention_steps=10_000, retention_extraction_steps=10_000,
        retention_authors_layers=16, retention_seeds=(0, 1, 2),
        ablation_copy_n=512, ablation_steps=10_000, ablation_lm_steps=20_000,
    ),
}
SCALES["quick"] = dataclasses.replace(SCALES["default"], name="quick", seeds=(0,), copy_ns=(128,), copy_steps=200,
                                      copy_lrs=(3e-3,), lm_seeds=(0,), lm_equal_seeds=(0,), lm_steps=200,
                                      lm_sweep_steps=50, mqar_settings=((4, 64),), mqar_steps=1_000,
                                      mqar_lrs=(1e-3, 3e-3), mqar_seeds=(0,), width_lrs=(3e-3,), retention_steps=600,
                                      retention_extraction_steps=600, retention_seeds=(0,), ablation_copy_n=128,
                                      ablation_steps=200, ablation_lm_steps=100)


def scale(name: str, device: str = "cpu") -> Scale:
    """The scale ``name`` on ``device``; SettingsError naming the flag for an unknown one."""
    if name not in SCALES:
        raise SettingsError(f"--scale must be one of {', '.join(SCALES)}, got {name!r}")
    if device not in ("cpu", "cuda"):
        raise SettingsError(f"--device must be cpu or cuda, got {device!r}")
    return dataclasses.replace(SCALES[name], device=device)
