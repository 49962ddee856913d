"""Information retention through one vector (the paper's claim 2): information
extraction from a frozen trained language model, and information capacity of
an encoder trained end to end (lab.experiments.retention).

    python scripts/retention.py                                   # both modes, 4 archs, default corpus
    python scripts/retention.py --modes capacity --archs tmm,hyena --steps 300
    python scripts/retention.py --modes extraction --encoder tmm=ckpt/tmm   # a saved LM instead of pretraining
    python scripts/retention.py --mode authors --decoder-layers 16         # the authors' decoder, their depth

Data: windows of --n tokens of the lm task (--corpus, default the KJV corpus;
--tokenizer byte or bpe). extraction: each architecture trained as a language
model for --pretrain-steps (or loaded with --encoder ARCH=CHECKPOINT), frozen,
then a decoder learns to regenerate the window from its last hidden state;
capacity: encoder and decoder trained together for --steps; none (on unless
--no-baseline): the decoder on a zero vector. --mode picks the bottleneck and
decoder: batchnorm (the default) or authors (the raw last block's state at
position -2, the unroll bottleneck, masked-mixer blocks; 4 by default, 16 as
the authors').

Output in --out (default results/retention-<timestamp>/): metrics.jsonl,
summary.json, summary.md, retention_vs_steps.png, retention_by_position.png.
"""
import argparse
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see lab/cli/compare.py

from lab import REPO  # noqa: E402
from lab.experiments.errors import SettingsError  # noqa: E402
from lab.experiments.retention import (AUTHORS_DECODER_LAYERS, DECODER_MODES, MODE_DEFAULTS,  # noqa: E402
                                       RetentionSettings, run_retention)

D = RetentionSettings()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--modes", default=",".join(D.modes), help="comma-separated: extraction, capacity")
    p.add_argument("--mode", choices=DECODER_MODES, default=D.mode,
                   help="the bottleneck and decoder: batchnorm (comparable with earlier results) or authors "
                        "(the authors' information-extraction setup)")
    p.add_argument("--archs", default=D.archs, help="uses models/<arch>-cpu-small.json")
    p.add_argument("--configs", default=None, help="comma-separated config names or JSON paths; replaces --archs")
    p.add_argument("--no-baseline", dest="baseline", action="store_false", help="skip the zero-vector baseline")
    p.add_argument("--encoder", action="append", default=[], metavar="ARCH=CHECKPOINT",
                   help="extraction: use this saved model as ARCH's frozen encoder instead of pretraining it")
    p.add_argument("--n", type=int, default=D.n, help="tokens per window (the input to regenerate)")
    p.add_argument("--source", choices=["corpus", "random"], default=D.source,
                   help="corpus: windows of the lm task; random: uniform random tokens out of --random-vocab "
                        "(capacity only), scored in bits recovered beyond a uniform guess")
    p.add_argument("--random-vocab", type=int, default=D.random_vocab, help="--source random: the vocabulary")
    p.add_argument("--corpus", default=None, help="text/JSONL/Parquet file or folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", choices=["byte", "bpe"], default=D.tokenizer)
    p.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="another option of the lm task (e.g. vocab=2048, section_bytes=4096); repeatable")
    p.add_argument("--pretrain-steps", type=int, default=D.pretrain_steps,
                   help="extraction: language-model steps per encoder")
    p.add_argument("--steps", type=int, default=D.steps, help="decoder (extraction) or autoencoder (capacity) steps")
    p.add_argument("--batch-size", type=int, default=D.batch_size)
    p.add_argument("--lr", type=float, default=D.lr)
    p.add_argument("--decoder-d", type=int, default=None,
                   help=f"decoder width (default: {MODE_DEFAULTS['batchnorm']['decoder_d']} in batchnorm mode, "
                        "each encoder's d in authors mode)")
    p.add_argument("--decoder-layers", type=int, default=None,
                   help=f"decoder blocks (default: {MODE_DEFAULTS['batchnorm']['decoder_layers']} in batchnorm "
                        f"mode, {MODE_DEFAULTS['authors']['decoder_layers']} in authors mode, a CPU-sized depth; "
                        f"the authors': {AUTHORS_DECODER_LAYERS})")
    p.add_argument("--decoder-heads", type=int, default=None,
                   help="decoder mixer heads (default 4 in both modes, as the authors' decoder; authors mode: "
                        "0 = one flat masked matrix)")
    p.add_argument("--level-off", action="store_true",
                   help="train each decoder until its held-out loss levels off (lab.experiments.levelling); "
                        "--steps is then the cap")
    p.add_argument("--position", type=int, default=None,
                   help=f"the encoder position read (default: {MODE_DEFAULTS['batchnorm']['position']} in "
                        f"batchnorm mode, {MODE_DEFAULTS['authors']['position']} in authors mode)")
    p.add_argument("--eval-batches", type=int, default=D.eval_batches,
                   help="held-out batches per evaluation during training")
    p.add_argument("--final-eval-batches", type=int, default=D.final_eval_batches,
                   help="held-out batches of the final per-position accuracy")
    p.add_argument("--time-budget-min", type=float, default=None, help="cap on each mode's total training time")
    p.add_argument("--save-encoders", action="store_true",
                   help="save each pretrained LM under OUT/encoders/ and each capacity-trained encoder "
                        "(the C++ model itself, not a Python twin) under OUT/capacity-encoders/")
    p.add_argument("--threads", type=int, default=D.threads)
    p.add_argument("--seed", type=int, default=D.seed)
    p.add_argument("--out", default=None)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --out: its finished (mode, arch) runs are kept")
    args = p.parse_args(argv)
    encoders = {}
    for item in args.encoder:
        arch, sep, path = item.partition("=")
        if not sep or not arch or not path:
            p.error(f"--encoder expects ARCH=CHECKPOINT, got '{item}'")
        encoders[arch] = path
    args.encoder = encoders
    try:
        return RetentionSettings(**vars(args)).checked()
    except SettingsError as e:
        p.error(str(e))


def main(argv=None) -> int:
    settings = parse_args(argv)
    try:
        result = run_retention(settings, results_root=REPO / "results", log_prefix="retention.py")
    except SettingsError as e:
        sys.exit(f"retention.py: {e}")
    print(f"\nResults in {result.out}\n\n{result.markdown}\n")
    print("\n".join(result.verdicts))
    return 0

