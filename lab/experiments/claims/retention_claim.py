"""Claim 2, information retention through one vector
(lab.experiments.retention), in bits recovered.

- Extraction: windows of claim 1's corpus; the encoders are the language
  models the ``lm`` claim trained at matched compute (seed k's run for
  seed k, frozen; each pretrained by the retention harness itself when that
  claim has not run on this machine).
- Capacity: windows of random tokens (``retention_random_vocab`` ids,
  ``retention_n`` per window), encoder and decoder trained end to end.
- Both against the decoder on a zero vector (the no-information baseline),
  in both harnesses: the BatchNorm decoder and the authors' (unroll
  bottleneck, 4-head masked-mixer blocks); seeds ``retention_seeds``.

Every decoder trains a fixed budget (``retention_extraction_steps`` for
extraction, ``retention_steps`` for capacity), the same for every encoder,
so that no rival is read at another point of its schedule. The measure is
the **bits recovered**: the sum over the window's positions of log2 V -
cross-entropy / ln 2 on held-out windows. On random tokens the zero-state
optimum is exactly 0 bits and each token recovered exactly adds log2 V (4
bits at V = 16); on the corpus the baseline's bits are what the position
alone predicts, and the encoders are judged above it.

Verdict rules, one per rival (the paper's capacity claim names Hyena and
Mamba; extraction also the Transformer), each on the margin TMM's bits -
the rival's - 1 bit per paired seed (a difference of 1 bit or less is a tie;
the settle rule of :mod:`.margins`):

- extraction: TMM's state allows higher-fidelity regeneration than each of
  the Transformer's, Hyena's and Mamba2's;
- capacity: TMM holds more information than each of Hyena and Mamba2.

Each is not tested when TMM or the rival did not run, or when no encoder of
the mode is above the zero-vector reference by more than 1 bit (the
baseline's mean bits, at least 0 on random tokens, where 0 is its optimum):
no state carries usable information at this scale.
"""
from __future__ import annotations

from tmm.tables import markdown_table

from ..formatting import fmt_num
from ..retention import RetentionSettings
from . import lm_claim
from .margins import Margin, judged
from .models import lm_models
from .report import UNTESTED, ClaimResult, Verdict

NAME = "retention"
ONE_MACHINE = True  # reads claim 1's checkpoints, and operator-index reads its encoders: not run with --any-machine
TITLE = "Claim 2: information extraction and capacity"
STATEMENT = ("from a frozen pretrained model's last hidden state a trained decoder regenerates the input, TMM's "
             "with higher fidelity; trained end to end through that single vector, TMM holds more information "
             "than Hyena or Mamba.")
MARGIN_BITS = 1.0  # "above": by more than this many bits over the whole window
# RetentionSettings.mode: the present decoder, and the authors' (unroll bottleneck + masked-mixer blocks)
HARNESSES = ("batchnorm", "authors")
MODELS = ("tmm", "transformer", "hyena", "mamba2")  # the encoders (and "none", the zero vector)
DECODER_HEADS = 4  # the authors' decoder (their MixerHead), and the BatchNorm decoder's TMM blocks
FINAL_EVAL_BATCHES = 64  # held-out windows of batch_size each for the final bits (512 at default)
RIVALS = {"extraction": ("transformer", "hyena", "mamba2"), "capacity": ("hyena", "mamba2")}
CLAIMS = {"extraction": "TMM's state allows higher-fidelity regeneration than {}'s",
          "capacity": "TMM holds more information than {}"}


def settings_for(suite, harness: str, mode: str, seed: int) -> RetentionSettings:
    """The retention job of ``harness`` for ``mode`` (extraction on the corpus, capacity on random tokens)."""
    s = suite.scale
    specs = lm_models(s.lm_d, s.lm_seq_len, names=MODELS)
    paths = suite.configs(suite.root / "retention" / "models", specs)
    common = dict(modes=[mode], configs=",".join(paths), n=s.retention_n, batch_size=s.batch_size, seed=seed,
                  mode=harness, decoder_heads=DECODER_HEADS, final_eval_batches=FINAL_EVAL_BATCHES,
                  save_encoders=True, decoder_layers=s.retention_authors_layers if harness == "authors" else None)
    if mode == "capacity":
        return RetentionSettings(source="random", random_vocab=s.retention_random_vocab, steps=s.retention_steps,
                                 **common)
    encoders = {}
    for spec in specs:
        ckpt = None if suite.dry_run else lm_claim.matched_checkpoint(suite, spec.label, seed)
        if ckpt is not None:
            encoders[spec.label] = str(ckpt)
    opts = [f"{k}={v}" for k, v in lm_claim.task_options(s).items() if k not in ("seq_len", "tokenizer")]
    return RetentionSettings(encoder=encoders, tokenizer=s.lm_tokenizer, task_option=opts,
                             pretrain_steps=s.lm_steps, steps=s.retention_extraction_steps, **common)


def job_path(harness: str, mode: str, seed: int) -> str:
    return f"retention/{harness}/{'extraction' if mode == 'extraction' else 'capacity-random'}/seed{seed}"


def run(suite) -> ClaimResult:
    s = suite.scale
    c = ClaimResult(NAME, TITLE, STATEMENT, setup=(
        f"Extraction: windows of {s.retention_n} tokens of claim 1's corpus and tokenizer, encoders claim 1's "
        f"models (its matched-compute runs, seed k's for seed k, where they are on this machine; else pretrained "
        f"here for {s.lm_steps} steps). Capacity: windows of {s.retention_n} random tokens out of "
        f"{s.retention_random_vocab}, encoder and decoder trained end to end. Decoders: the BatchNorm decoder "
        f"(harness `batchnorm`) and the authors' unroll bottleneck with {s.retention_authors_layers} "
        f"{DECODER_HEADS}-head masked-mixer blocks (harness `authors`; the authors use 16), reading position -2; "
        f"batch {s.batch_size}, seeds {', '.join(map(str, s.retention_seeds))}, every decoder a fixed "
        f"{s.retention_extraction_steps} steps (extraction) or {s.retention_steps} (capacity). Measured in bits "
        f"recovered (sum over positions of log2 V - cross-entropy / ln 2) on {FINAL_EVAL_BATCHES * s.batch_size} "
        "held-out windows: 0 for the zero state on random tokens."))
    for name in HARNESSES:
        for mode in ("extraction", "capacity"):
            rows = []
            for seed in s.retention_seeds:
                summary = suite.retention(job_path(name, mode, seed), settings_for(suite, name, mode, seed))
                if summary is not None:
                    rows += [{**r, "seed": seed} for r in summary["table"]]
            if suite.dry_run:
                continue
            source = "random tokens" if mode == "capacity" else "corpus, encoders from claim 1's runs"
            c.tables.append((f"Harness `{name}`, {mode} ({source}; mean [range] over seeds):", table(rows)))
            c.verdicts += verdicts(rows, name, mode)
            png = f"{job_path(name, mode, s.retention_seeds[0])}/retention_loss_by_position.png"
            if (suite.root / png).is_file():
                c.plots.append(png)
    return c


def _bits(rows, mode) -> dict:
    """arch -> seed -> bits recovered of ``mode``'s rows."""
    out = {}
    for r in rows:
        if r["mode"] == mode and r.get("bits_recovered") is not None:
            out.setdefault(r["arch"], {})[r["seed"]] = r["bits_recovered"]
    return out


def _cell(values, nd) -> str:
    if not values:
        return "-"
    m = sum(values) / len(values)
    return f"{m:.{nd}f}" if len(values) == 1 else f"{m:.{nd}f} [{min(values):.{nd}f}-{max(values):.{nd}f}]"


def table(rows) -> str:
    by = {}
    for r in rows:
        by.setdefault(r["arch"], []).append(r)
    body = [[arch, _cell([r["bits_recovered"] for r in rs if r.get("bits_recovered") is not None], 2),
             _cell([r["token_acc"] for r in rs if r.get("token_acc") is not None], 3),
             _cell([r["eval_loss"] for r in rs if r.get("eval_loss") is not None], 3),
             "/".join(sorted({str(r.get("steps") or "-") for r in rs})), str(len(rs))] for arch, rs in by.items()]
    return markdown_table(["model", "bits recovered", "token acc", "eval loss", "decoder steps", "seeds"], body)


def verdicts(rows, harness: str, mode: str) -> list:
    """The rules of the module docstring on the rows of every seed of one (harness, mode) (each row with
    mode, arch, seed, bits_recovered), one verdict per rival."""
    bits = _bits(rows, mode)
    mean = {a: sum(v.values()) / len(v) for a, v in bits.items()}
    ev = "bits recovered: " + ", ".join(f"{a} {fmt_num(m, 2)}" for a, m in mean.items())
    ref = mean.get("none")
    if ref is not None and mode == "capacity" and ref < 0:
        ev += " (zero-vector reference 0, its optimum on random tokens)"
        ref = 0.0
    out = []
    for rival in RIVALS[mode]:
        claim = f"{harness}, {mode}: {CLAIMS[mode].format(rival)}"
        missing = [a for a in ("tmm", rival, "none") if a not in bits]
        if missing:
            out.append(Verdict(claim, UNTESTED, ev + f" (not run: {', '.join(missing)})"))
            continue
        if max(v for a, v in mean.items() if a != "none") <= ref + MARGIN_BITS:
            out.append(Verdict(claim, UNTESTED, ev + f" (no encoder beats the zero vector by more than "
                                                     f"{MARGIN_BITS:g} bit: no usable information at this scale)"))
            continue
        m = Margin({seed: b - bits[rival][seed] - MARGIN_BITS for seed, b in bits["tmm"].items()
                    if seed in bits[rival]}, unit="bits", digits=2)
        out.append(judged(claim, m.verdict, m, ev + f" (margin: tmm - {rival} - {MARGIN_BITS:g} bit)"))
    return out
