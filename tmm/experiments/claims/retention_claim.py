"""Claim 2, information retention through one vector
(tmm.experiments.retention): extraction from the language models the
``lm`` claim trained (seed 0, frozen; each pretrained by the retention
harness itself when that claim has not run), and capacity trained end to
end, against the decoder on a zero vector (the no-information baseline).

Verdict rules (token accuracy of the regenerated window):

- TMM's state allows higher-fidelity regeneration (extraction): TMM's
  accuracy at least 0.02 above every baseline architecture's, and at least
  0.02 above the zero-vector baseline; not tested when no encoder beats the
  zero vector by 0.02 (no state carries usable information at this scale).
- TMM holds more information than Hyena or Mamba2 (capacity): TMM's accuracy
  at least 0.02 above both.
"""
from __future__ import annotations

from ..retention import RetentionSettings
from . import lm_claim
from .models import lm_models
from .report import CONSISTENT, NOT_CONSISTENT, UNTESTED, ClaimResult, Verdict

NAME = "retention"
TITLE = "Claim 2: information extraction and capacity"
STATEMENT = ("from a frozen pretrained model's last hidden state a trained decoder regenerates the input, TMM's "
             "with higher fidelity; trained end to end through that single vector, TMM holds more information "
             "than Hyena or Mamba.")
MARGIN = 0.02
# RetentionSettings.mode: the present decoder, and the authors' (unroll bottleneck + masked-mixer blocks)
HARNESSES = ("batchnorm", "authors")


def settings_for(suite, harness: str) -> RetentionSettings:
    s = suite.scale
    specs = lm_models(s.lm_d)
    paths = suite.configs(suite.root / "retention" / "models", specs)
    encoders = {}
    for spec in specs:
        ckpt = lm_claim.long_run_checkpoint(suite, spec.label)
        if ckpt is not None:
            encoders[spec.label] = str(ckpt)
    opts = [f"{k}={v}" for k, v in lm_claim.task_options(s).items() if k not in ("seq_len", "tokenizer")]
    return RetentionSettings(
        modes=["extraction", "capacity"], configs=",".join(paths), encoder=encoders, n=s.retention_n,
        tokenizer=s.lm_tokenizer, task_option=opts, pretrain_steps=s.lm_steps, steps=s.retention_steps,
        batch_size=s.batch_size, seed=0, mode=harness,
        decoder_layers=s.retention_authors_layers if harness == "authors" else None,
        save_encoders=True)


def run(suite) -> ClaimResult:
    s = suite.scale
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"Windows of {s.retention_n} tokens of claim 1's corpus and tokenizer; encoders: claim 1's models (the LM "
        f"runs' seed-0 checkpoints for extraction where they exist, else pretrained here for {s.lm_steps} steps); "
        f"decoders: the BatchNorm decoder (harness `batchnorm`, its default size) and the authors' unroll bottleneck "
        f"with {s.retention_authors_layers} masked-mixer blocks (harness `authors`; the authors use 16), reading "
        f"position -2; {s.retention_steps} steps of batch {s.batch_size}, seed 0."))
    for name in HARNESSES:
        settings = settings_for(suite, name)
        summary = suite.retention(f"retention/{name}", settings)
        if summary is None:
            continue
        rows = summary["table"]
        header = "| mode | model | token acc | eval loss | LM eval bpb |\n|---|---|---|---|---|"
        body = [f"| {r['mode']} | {r['arch']} | {_f(r['token_acc'])} | {_f(r['eval_loss'])} | {_f(r['lm_eval_bpb'])} |"
                for r in rows]
        c.tables.append((f"Harness `{name}`"
                         + (" (encoders from claim 1's checkpoints)" if settings.encoder else
                            " (encoders pretrained here)") + ":", "\n".join([header] + body)))
        c.verdicts += verdicts(rows, name)
        for png in ("retention_vs_steps.png", "retention_by_position.png"):
            if (suite.root / "retention" / name / png).is_file():
                c.plots.append(f"retention/{name}/{png}")
    return c


def _f(x):
    return "-" if x is None else f"{x:.3f}"


def verdicts(rows, harness) -> list:
    acc = {(r["mode"], r["arch"]): r["token_acc"] for r in rows if r["token_acc"] is not None}
    out = []
    for mode, rivals, claim in (
            ("extraction", ("transformer", "hyena", "mamba2"), "TMM's state allows higher-fidelity regeneration"),
            ("capacity", ("hyena", "mamba2"), "TMM holds more information than Hyena or Mamba2")):
        mine = acc.get((mode, "tmm"))
        base = acc.get((mode, "none"))
        others = {a: acc[(mode, a)] for a in rivals if (mode, a) in acc}
        ev = f"token acc: tmm {_f(mine)}, " + ", ".join(f"{a} {_f(v)}" for a, v in others.items()) + \
            f", zero vector {_f(base)}"
        claim = f"{harness}, {mode}: {claim}"
        if mine is None or not others:
            out.append(Verdict(claim, UNTESTED, ev + " (not run)"))
            continue
        best_any = max([mine, *others.values()])
        if base is not None and best_any < base + MARGIN:
            out.append(Verdict(claim, UNTESTED, ev + " (no encoder beats the zero vector by "
                                                     f"{MARGIN}: no usable information at this scale)"))
            continue
        ok = mine >= max(others.values()) + MARGIN and (base is None or mine >= base + MARGIN)
        out.append(Verdict(claim, CONSISTENT if ok else NOT_CONSISTENT, ev + f" (margin {MARGIN})"))
    return out

