"""Claim 2, information retention through one vector
(tmm.experiments.retention): extraction from the language models the
``lm`` claim trained (seed 0, frozen; each pretrained by the retention
harness itself when that claim has not run), and capacity trained end to
end, against the decoder on a zero vector (the no-information baseline).

Verdict rules (token accuracy of the regenerated window; "above" = by more
than 0.02, so 0.02 or less is a tie, and a tie is not consistent):

- TMM's state allows higher-fidelity regeneration (extraction): TMM's
  accuracy above every baseline architecture's (Transformer, Hyena, Mamba2)
  and above the zero-vector baseline's.
- TMM holds more information than Hyena or Mamba2 (capacity): TMM's accuracy
  above both, and above the zero-vector baseline's.

Either is not tested when TMM or the zero-vector baseline did not run, when
no encoder of the mode (the Transformer's included) is above the zero vector
(no state carries usable information at this scale), or when a rival did not
run and TMM is above every one that did.
"""
from __future__ import annotations

from ..retention import RetentionSettings
from . import lm_claim
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict, all_of

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
        others = {a: acc.get((mode, a)) for a in rivals}
        ev = f"token acc: tmm {_f(mine)}, " + ", ".join(f"{a} {_f(v)}" for a, v in others.items()) + \
            f", zero vector {_f(base)}"
        claim = f"{harness}, {mode}: {claim}"
        if mine is None or base is None:
            out.append(Verdict(claim, UNTESTED, ev + " (not run)"))
            continue
        # every encoder of the mode, the Transformer's too where it is no rival: does the harness carry information?
        if max(v for (m, a), v in acc.items() if m == mode and a != "none") <= base + MARGIN:
            out.append(Verdict(claim, UNTESTED, ev + " (no encoder beats the zero vector by more than "
                                                     f"{MARGIN}: no usable information at this scale)"))
            continue
        checks = {a: None if v is None else mine > v + MARGIN for a, v in others.items()}
        checks["zero vector"] = mine > base + MARGIN
        out.append(Verdict(claim, all_of(checks), ev + f" (margin {MARGIN})"))
    return out
