#!/usr/bin/env python3
"""Prepares and describes a language-modelling corpus (the ``lm`` task's).

    python scripts/prepare_corpus.py                       # writes the default corpus (KJV) to the cache, prints its split
    python scripts/prepare_corpus.py --corpus fineweb/ --tokenizer bpe --vocab 8000 --save-tokenizer tok.json

The default corpus is written from the Debian packages bible-kjv and
bible-kjv-text (installed by scripts/_env.sh) on first use by any script;
running this once ahead of time only moves that moment. With
``--save-tokenizer`` the trained BPE is written (atomically) as a
``tokenizers`` JSON file.
"""
import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import tmm.tasks  # noqa: E402
from tmm.files import atomic_write_text  # noqa: E402
from tmm.tasks.corpus import default_corpus  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", default=None, help="a .txt/.jsonl/.parquet file or a folder (default: the KJV corpus)")
    p.add_argument("--tokenizer", choices=["byte", "bpe"], default="byte")
    p.add_argument("--vocab", type=int, default=1024, help="BPE vocabulary size")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--max-bytes", type=int, default=0, help="read at most this many bytes (0: all)")
    p.add_argument("--save-tokenizer", default=None, help="write the trained BPE here (JSON)")
    args = p.parse_args(argv)
    if args.save_tokenizer and args.tokenizer != "bpe":
        p.error("--save-tokenizer needs --tokenizer bpe")

    t0 = time.monotonic()
    opts = {"tokenizer": args.tokenizer, "seq_len": args.seq_len, "max_bytes": args.max_bytes}
    if args.corpus:
        opts["corpus"] = args.corpus
    else:
        print(f"default corpus: {default_corpus()}")
    if args.tokenizer == "bpe":
        opts["vocab"] = args.vocab
    task = tmm.tasks.make("lm", **opts)
    print(task.describe())
    print(f"bytes per token: train {task.train_bytes / len(task.train_ids):.3f}, "
          f"held-out {task.eval_bytes / len(task.eval_ids):.3f}; {time.monotonic() - t0:.1f} s")
    if args.save_tokenizer:
        path = Path(args.save_tokenizer)
        atomic_write_text(path, json.dumps(task.tokenizer.to_json()))
        print(f"tokenizer written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
