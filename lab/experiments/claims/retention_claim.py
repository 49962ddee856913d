"""Claim 2, information retention through one vector
(lab.experiments.retention), in bits recovered.

- Extraction: windows of claim 1's corpus; the encoders are the language
  models the ``lm`` claim trained (seed 0, frozen; each pretrained by the
  retention harness itself when that claim has not run).
- Capacity: windows of random tokens (``retention_random_vocab`` ids,
  ``retention_n`` per window), encoder and decoder trained end to end.
- Both against the decoder on a zero vector (the no-information baseline),
  in both harnesses: the BatchNorm decoder and the authors' (unroll
  bottleneck, 4-head masked-mixer blocks).

Every decoder trains until its held-out loss levels off
(:mod:`lab.experiments.levelling`), ``retention_steps`` the cap. The
measure is the **bits recovered**: the sum over the window's positions of
log2 V - cross-entropy / ln 2 on held-out windows. On random tokens the
zero-state optimum is exactly 0 bits and each token recovered exactly adds
log2 V (4 bits at V = 16); on the corpus the baseline's bits are what the
position alone predicts (the unigram statistics), and the encoders are
judged above it.

Verdict rules ("above" = by more than MARGIN_BITS, so a difference of 1 bit
or less is a tie, and a tie is not consistent):

- TMM's state allows higher-fidelity regeneration (extraction): TMM's bits
  above every baseline architecture's (Transformer, Hyena, Mamba2) and above
  the zero-vector baseline's.
- TMM holds more information than Hyena or Mamba2 (capacity): TMM's bits
  above both, and above the zero-vector reference: the baseline's measured
  bits, or 0 on random tokens where that is higher (0 is its optimum: a
  measured value below 0 is a decoder short of it, not less information).

Either is not tested when TMM or the zero-vector baseline did not run, when
no encoder of the mode (the Transformer's included) is above the zero-vector
reference (no state carries usable information at this scale), or when a
rival did not run and TMM is above every one that did.
"""
from __future__ import annotations

from tmm.tables import markdown_table

from ..formatting import fmt_num
from ..retention import RetentionSettings
from . import lm_claim
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict, all_of

NAME = "retention"
ONE_MACHINE = True  # reads claim 1's checkpoints, and operator-index reads its encoders: not run with --any-machine
TITLE = "Claim 2: information extraction and capacity"
STATEMENT = ("from a frozen pretrained model's last hidden state a trained decoder regenerates the input, TMM's "
             "with higher fidelity; trained end to end through that single vector, TMM holds more information "
             "than Hyena or Mamba.")
MARGIN_BITS = 1.0  # "above": by more than this many bits over the whole window
# RetentionSettings.mode: the present decoder, and the authors' (unroll bottleneck + masked-mixer blocks)
HARNESSES = ("batchnorm", "authors")
DECODER_HEADS = 4  # the authors' decoder (their MixerHead), and the BatchNorm decoder's TMM blocks
FINAL_EVAL_BATCHES = 64  # held-out windows of batch_size each for the final bits (512 at default)


def settings_for(suite, harness: str, mode: str) -> RetentionSettings:
    """The retention job of ``harness`` for ``mode`` (extraction on the corpus, capacity on random tokens)."""
    s = suite.scale
    specs = lm_models(s.lm_d)
    paths = suite.configs(suite.root / "retention" / "models", specs)
    common = dict(modes=[mode], configs=",".join(paths), n=s.retention_n, steps=s.retention_steps,
                  batch_size=s.batch_size, seed=0, mode=harness, decoder_heads=DECODER_HEADS, level_off=True,
                  final_eval_batches=FINAL_EVAL_BATCHES, save_encoders=True,
                  decoder_layers=s.retention_authors_layers if harness == "authors" else None)
    if mode == "capacity":
        return RetentionSettings(source="random", random_vocab=s.retention_random_vocab, **common)
    encoders = {}
    for spec in specs:
        ckpt = lm_claim.long_run_checkpoint(suite, spec.label)
        if ckpt is not None:
            encoders[spec.label] = str(ckpt)
    opts = [f"{k}={v}" for k, v in lm_claim.task_options(s).items() if k not in ("seq_len", "tokenizer")]
    return RetentionSettings(encoder=encoders, tokenizer=s.lm_tokenizer, task_option=opts,
                             pretrain_steps=s.lm_steps, **common)


def job_path(harness: str, mode: str) -> str:
    return f"retention/{harness}/{'extraction' if mode == 'extraction' else 'capacity-random'}"


def run(suite) -> ClaimResult:
    s = suite.scale
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"Extraction: windows of {s.retention_n} tokens of claim 1's corpus and tokenizer, encoders claim 1's "
        f"models (the LM runs' seed-0 checkpoints where they exist, else pretrained here for {s.lm_steps} steps). "
        f"Capacity: windows of {s.retention_n} random tokens out of {s.retention_random_vocab}, encoder and "
        f"decoder trained end to end. Decoders: the BatchNorm decoder (harness `batchnorm`) and the authors' "
        f"unroll bottleneck with {s.retention_authors_layers} {DECODER_HEADS}-head masked-mixer blocks (harness "
        f"`authors`; the authors use 16), reading position -2; batch {s.batch_size}, seed 0, each decoder trained "
        f"until its held-out loss levels off (at most {s.retention_steps} steps). Measured in bits recovered "
        f"(sum over positions of log2 V - cross-entropy / ln 2) on {FINAL_EVAL_BATCHES * s.batch_size} held-out "
        "windows: 0 for the zero state on random tokens."))
    for name in HARNESSES:
        for mode in ("extraction", "capacity"):
            settings = settings_for(suite, name, mode)
            summary = suite.retention(job_path(name, mode), settings)
            if summary is None:
                continue
            rows = summary["table"]
            head = ["model", "bits recovered", "token acc", "eval loss", "decoder steps", "LM eval bpb"]
            body = [[r["arch"], fmt_num(r.get("bits_recovered"), 2), fmt_num(r["token_acc"]), fmt_num(r["eval_loss"]),
                     f"{r.get('steps') or '-'}{' (levelled off)' if r.get('levelled') else ''}",
                     fmt_num(r["lm_eval_bpb"])] for r in rows]
            source = ("random tokens" if mode == "capacity" else
                      "corpus, encoders from claim 1's checkpoints" if settings.encoder else
                      "corpus, encoders pretrained here")
            c.tables.append((f"Harness `{name}`, {mode} ({source}):", markdown_table(head, body, left=len(head))))
            c.verdicts += verdicts(rows, name, modes=[mode], random_source=(mode == "capacity"))
            for png in ("retention_loss_by_position.png", "retention_by_position.png"):
                if (suite.root / job_path(name, mode) / png).is_file():
                    c.plots.append(f"{job_path(name, mode)}/{png}")
    return c


CLAIMS = {"extraction": (("transformer", "hyena", "mamba2"), "TMM's state allows higher-fidelity regeneration"),
          "capacity": (("hyena", "mamba2"), "TMM holds more information than Hyena or Mamba2")}


def verdicts(rows, harness, modes=None, random_source=None) -> list:
    """The rules of the module docstring on one job's table rows (each with
    mode, arch, bits_recovered), one verdict per mode of ``modes`` (default:
    those the rows hold); ``random_source`` (default: capacity is on random
    tokens) floors the zero-vector reference at 0."""
    bits = {(r["mode"], r["arch"]): r.get("bits_recovered") for r in rows}
    bits = {k: v for k, v in bits.items() if v is not None}
    out = []
    for mode in modes or [m for m in CLAIMS if any(r["mode"] == m for r in rows)]:
        rivals, claim = CLAIMS[mode]
        floor = (mode == "capacity") if random_source is None else random_source
        mine = bits.get((mode, "tmm"))
        base = bits.get((mode, "none"))
        others = {a: bits.get((mode, a)) for a in rivals}
        ev = (f"bits recovered: tmm {fmt_num(mine, 2)}, " + ", ".join(f"{a} {fmt_num(v, 2)}" for a, v in others.items())
              + f", zero vector {fmt_num(base, 2)}")
        claim = f"{harness}, {mode}: {claim}"
        if mine is None or base is None:
            out.append(Verdict(claim, UNTESTED, ev + " (not run)"))
            continue
        ref = max(base, 0.0) if floor else base
        if floor and base < 0:
            ev += " (reference 0, the zero state's optimum on random tokens)"
        # every encoder of the mode, the Transformer's too where it is no rival: does the harness carry information?
        if max(v for (m, a), v in bits.items() if m == mode and a != "none") <= ref + MARGIN_BITS:
            out.append(Verdict(claim, UNTESTED, ev + " (no encoder beats the zero vector by more than "
                                                     f"{MARGIN_BITS:g} bit: no usable information at this scale)"))
            continue
        checks = {a: None if v is None else mine > v + MARGIN_BITS for a, v in others.items()}
        checks["zero vector"] = mine > ref + MARGIN_BITS
        out.append(Verdict(claim, all_of(checks), ev + f" (margin {MARGIN_BITS:g} bit)"))
    return out

