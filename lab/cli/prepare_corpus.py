"""Prepares a language-modelling corpus: describes the ``lm`` task's split, or
tokenises it into token shards for training at scale (``--out``).

    python scripts/prepare_corpus.py                       # writes the default corpus (KJV) to the cache, prints its split
    python scripts/prepare_corpus.py --corpus fineweb/ --tokenizer bpe --vocab 8000 --save-tokenizer tok.json
    python scripts/prepare_corpus.py --corpus fineweb-edu/ --out shards/ --tokenizer bpe --vocab 8192 --workers 8

The default corpus is written from the Debian packages bible-kjv and
bible-kjv-text (installed by scripts/_env.sh) on first use by any script;
running this once ahead of time only moves that moment. With
``--save-tokenizer`` the trained BPE is written (atomically) as a
``tokenizers`` JSON file.

With ``--out`` the corpus becomes token shards (tmm.data.prepare_corpus,
docs/training.md): ``train-*.tok`` and ``val-*.tok`` (the lm task's split),
``manifest.json`` and, for a BPE, ``tokenizer.json``; ``--tokenizer`` may
then also name a tokenizer.json file. Run it again after a kill: finished
shards are kept, the rest written.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import tmm.tasks
from tmm.data.corpus import default_corpus
from tmm.files import atomic_write_text


def describe(args):
    t0 = time.monotonic()
    opts = {"tokenizer": args.tokenizer, "seq_len": args.seq_len, "max_bytes": args.max_bytes}
    if args.corpus:
        opts["corpus"] = args.corpus
    else:
        print(f"default corpus: {default_corpus()}")
    if args.tokenizer == "bpe":
        opts["vocab"] = args.vocab or 1024
    task = tmm.tasks.make("lm", **opts)
    print(task.describe())
    print(f"bytes per token: train {task.train_bytes / len(task.train_ids):.3f}, "
          f"held-out {task.eval_bytes / len(task.eval_ids):.3f}; {time.monotonic() - t0:.1f} s")
    if args.save_tokenizer:
        path = Path(args.save_tokenizer)
        atomic_write_text(path, json.dumps(task.tokenizer.to_json()))
        print(f"tokenizer written to {path}")
    return 0


def write_shards(args):
    from tmm.data import PrepareError, prepare_corpus

    try:
        prepare_corpus(args.corpus, args.out, tokenizer=args.tokenizer, vocab=args.vocab,
                       bpe_sample_bytes=args.bpe_sample_bytes, shard_bytes=args.shard_bytes,
                       section_bytes=args.section_bytes, eval_fraction=args.eval_fraction, max_bytes=args.max_bytes,
                       workers=args.workers, progress=not args.no_progress)
    except PrepareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=None, help="a .txt/.jsonl/.parquet file or a folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", default="byte",
                   help="byte or bpe; with --out also the path of a tokenizer.json")
    p.add_argument("--vocab", type=int, default=None, help="BPE vocabulary size (default 1024 without --out)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--max-bytes", type=int, default=0, help="read at most this many bytes (0: all)")
    p.add_argument("--save-tokenizer", default=None, help="write the trained BPE here (JSON)")
    shards = p.add_argument_group("token shards (--out)")
    shards.add_argument("--out", default=None, help="write token shards into this folder")
    shards.add_argument("--workers", type=int, default=None, help="tokenising processes (default: the CPUs)")
    shards.add_argument("--shard-bytes", type=int, default=64 << 20, help="text per shard (default 64 MiB)")
    shards.add_argument("--section-bytes", type=int, default=16384, help="the held-out split's unit (as the lm task)")
    shards.add_argument("--eval-fraction", type=float, default=0.05, help="the held-out share of sections")
    shards.add_argument("--bpe-sample-bytes", type=int, default=100_000_000,
                        help="train the BPE on this much training text first (--tokenizer bpe)")
    shards.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.out:
        if args.save_tokenizer:
            p.error("--save-tokenizer: with --out the BPE is saved as OUT/tokenizer.json")
        return write_shards(args)
    if args.tokenizer not in ("byte", "bpe"):
        p.error(f"--tokenizer must be byte or bpe without --out, got {args.tokenizer!r}")
    if args.save_tokenizer and args.tokenizer != "bpe":
        p.error("--save-tokenizer needs --tokenizer bpe")
    if args.vocab is not None and args.tokenizer != "bpe":
        p.error("--vocab needs --tokenizer bpe")
    return describe(args)

