"""Tokenizer throughput: tmm's C++ byte-level BPE (tmm.text.Tokenizer) against
the `tokenizers` package on the same text, with the ids checked equal.

    python scripts/bench_tokenizer.py                        # a BPE trained on the default corpus, 1 MB of it
    python scripts/bench_tokenizer.py --tokenizer tok.json --text corpus.txt --mb 4

Prints a table (tokenizer, bytes, tokens, seconds: median of --repeats,
MB/s) and writes it with the numbers as JSON to --out (default
results/bench_tokenizer-<timestamp>/results.json). A benchmark, not a test:
run it on an idle machine.
"""
import argparse
import statistics
import time
from pathlib import Path

import tmm.text
from lab import REPO
from lab.bench import provenance
from lab.bench.report import fresh_folder
from tmm.data.corpus import default_corpus, read_documents
from tmm.files import atomic_write_json


def timed(fn, repeats):
    """(result, median seconds) of `repeats` calls after one untimed."""
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", default=None, help="a tokenizer.json (default: a BPE trained on --text)")
    p.add_argument("--vocab", type=int, default=4096, help="vocabulary of the BPE trained without --tokenizer")
    p.add_argument("--text", default=None, help="a text/JSONL/Parquet corpus (default: the KJV corpus)")
    p.add_argument("--mb", type=float, default=1.0, help="megabytes of text to encode")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.mb <= 0 or args.repeats < 1:
        p.error("--mb must be > 0 and --repeats >= 1")

    limit = int(args.mb * 1e6)
    text = "\n\n".join(read_documents(args.text or default_corpus(), max_bytes=limit))
    while len(text.encode("utf-8")) < limit:  # a small corpus, repeated
        text += "\n\n" + text
    text = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    if args.tokenizer:
        json_text = Path(args.tokenizer).read_text(encoding="utf-8")
    else:
        json_text = tmm.text.train_bpe_json(iter(text.split("\n\n")), args.vocab)
    ours = tmm.text.Tokenizer.from_str(json_text)
    rows = []
    ids, seconds = timed(lambda: ours.encode(text), args.repeats)
    rows.append({"tokenizer": "tmm.text", "seconds": seconds})
    try:
        import tokenizers
    except ImportError:
        tokenizers = None
    if tokenizers is not None:
        ref = tokenizers.Tokenizer.from_str(json_text)
        ref_ids, seconds = timed(lambda: ref.encode(text).ids, args.repeats)
        rows.append({"tokenizer": f"tokenizers {tokenizers.__version__}", "seconds": seconds,
                     "same_ids": ref_ids == ids})
    nbytes = len(text.encode("utf-8"))
    print(f"{'tokenizer':<20} {'bytes':>10} {'tokens':>9} {'seconds':>8} {'MB/s':>7}")
    for r in rows:
        r.update(bytes=nbytes, tokens=len(ids), mb_per_s=nbytes / 1e6 / r["seconds"])
        print(f"{r['tokenizer']:<20} {nbytes:>10,} {len(ids):>9,} {r['seconds']:>8.3f} {r['mb_per_s']:>7.2f}"
              + ("" if r.get("same_ids", True) else "  DIFFERENT IDS"))
    out = Path(args.out) if args.out else fresh_folder(REPO / "results", "bench_tokenizer")
    atomic_write_json(out / "results.json", {"args": vars(args), "vocab_size": ours.vocab_size, "rows": rows,
                                             "git": provenance.git(REPO), "machine": provenance.environment()})
    print(f"wrote {out / 'results.json'}")
    return 0 if all(r.get("same_ids", True) for r in rows) else 1

