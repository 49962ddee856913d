"""A corpus tokenised into token shards (:mod:`tmm.data.shard_format`) by
parallel worker processes, resumable after a kill (``manifest.json`` records
the settings and the finished chunks; a restart gives the bytes of an
uninterrupted run). The shards hold the ``lm`` task's two token streams.

    manifest = prepare_corpus("fineweb-edu/", "shards/", tokenizer="bpe", vocab=8192, workers=8)

docs/training.md, section 1, is the manual.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
import time
from pathlib import Path

from ..files import atomic_write_json, atomic_write_text
from ..progress import Progress
from .corpus import _corpus_files, default_corpus, held_out, iter_documents, split_sections
from . import shard_format
from .manifest import MANIFEST, TOKENIZER, read_manifest, shard_name

__all__ = ["prepare_corpus", "PrepareError"]

# Seconds a worker sleeps before each chunk (a testing hook: widens the window for a kill).
DELAY_ENV = "TMM_PREPARE_CHUNK_DELAY_S"


class PrepareError(RuntimeError):
    """The output folder holds shards of other settings, or a bad argument."""


# ---------------------------------------------------------------- the worker side

_WORKER_TOKENIZER = [None]


def _load_tokenizer(tokenizer_json):
    from .. import text

    return text.Tokenizer.byte_level() if tokenizer_json is None else text.Tokenizer.from_str(tokenizer_json)


def _init_worker(tokenizer_json):
    _WORKER_TOKENIZER[0] = _load_tokenizer(tokenizer_json)


def _encode(sections):
    """The sections' tokens, concatenated (each section tokenised alone, as the lm task does)."""
    import numpy as np

    tok = _WORKER_TOKENIZER[0]
    parts = [np.asarray(tok.encode(s.decode("utf-8", errors="replace")), dtype=np.int64) for s in sections]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _write_chunk(out, index, train_sections, val_sections, dtype):
    """Tokenises one chunk and writes its two shards; returns their token counts."""
    delay = os.environ.get(DELAY_ENV)
    if delay:
        time.sleep(float(delay))
    counts = {}
    for split, sections in (("train", train_sections), ("val", val_sections)):
        tokens = _encode(sections)
        shard_format.write_shard(Path(out) / shard_name(split, index), tokens, dtype)
        counts[split] = int(tokens.size)
    return index, counts, sum(map(len, train_sections)) + sum(map(len, val_sections))


# ---------------------------------------------------------------- the main process


def _sections(corpus, max_bytes, section_bytes):
    """(global section index, bytes) of the corpus, as the lm task cuts it:
    each document + "\\n\\n" when there are several (one document of lookahead)."""
    docs = iter_documents(corpus, max_bytes)
    first = next(docs, None)
    if first is None:
        return
    second = next(docs, None)
    sep = "\n\n" if second is not None else ""
    index = 0

    def cut(doc):
        nonlocal index
        for s in split_sections((doc + sep).encode("utf-8"), section_bytes):
            yield index, s
            index += 1

    yield from cut(first)
    if second is not None:
        yield from cut(second)
        for doc in docs:
            yield from cut(doc)


def _chunks(corpus, max_bytes, section_bytes, stride, shard_bytes):
    """(chunk index, training sections, held-out sections): consecutive
    sections grouped until a chunk holds >= shard_bytes bytes."""
    index, train, val, size = 0, [], [], 0
    for i, s in _sections(corpus, max_bytes, section_bytes):
        (val if held_out(i, stride) else train).append(s)
        size += len(s)
        if size >= shard_bytes:
            yield index, train, val
            index, train, val, size = index + 1, [], [], 0
    if train or val:
        yield index, train, val


def _corpus_fingerprint(corpus):
    """What identifies the input: each file's path, size and modification time."""
    root = Path(corpus)
    return [[os.path.relpath(f, root) if root.is_dir() else f.name, f.stat().st_size, f.stat().st_mtime_ns]
            for f in _corpus_files(root)]


def _tokenizer_json(tokenizer, vocab, out, corpus, settings, log):
    """The tokenizer.json text (None for bytes): a file's, the one saved in
    ``out`` by an earlier run, or a BPE trained now on a sample."""
    saved = out / TOKENIZER
    if tokenizer == "byte":
        return None
    if tokenizer != "bpe":
        path = Path(tokenizer)
        if not path.is_file():
            raise PrepareError(f"prepare_corpus: tokenizer must be 'byte', 'bpe' or a tokenizer.json file, "
                               f"got {tokenizer!r} (no such file)")
        js = path.read_text(encoding="utf-8")
    elif saved.is_file() and (out / MANIFEST).is_file():
        return saved.read_text(encoding="utf-8")  # a restart: the BPE of the first run
    else:
        from .lm_tokenizer import make_tokenizer

        sample, size = [], 0
        for i, s in _sections(corpus, settings["max_bytes"], settings["section_bytes"]):
            if size >= settings["bpe_sample_bytes"]:
                break
            if not held_out(i, settings["stride"]):
                sample.append(s.decode("utf-8", errors="replace"))
                size += len(s)
        t0 = time.monotonic()
        js = make_tokenizer("bpe", sample, vocab).json_text
        log(f"trained a {vocab}-token BPE on {size:,} bytes of training text in {time.monotonic() - t0:.1f} s")
    atomic_write_text(saved, js)
    return js


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PrepareError(f"prepare_corpus: {name} must be an int >= {low}, got {value!r}")


def prepare_corpus(corpus, out, *, tokenizer="byte", vocab=None, bpe_sample_bytes=100_000_000,
                   shard_bytes=64 << 20, section_bytes=16384, eval_fraction=0.05, max_bytes=0,
                   workers=None, progress=True, log=print) -> dict:
    """Writes the token shards of ``corpus`` (None: the default corpus) into
    the folder ``out`` (docs/training.md, section 1) and returns the manifest."""
    for name, value, low in (("shard_bytes", shard_bytes, 1), ("section_bytes", section_bytes, 16),
                             ("max_bytes", max_bytes, 0), ("bpe_sample_bytes", bpe_sample_bytes, 1)):
        _check_int(name, value, low)
    if not 0.0 < eval_fraction <= 0.5:
        raise PrepareError(f"prepare_corpus: eval_fraction must be in (0, 0.5], got {eval_fraction!r}")
    if tokenizer == "bpe":
        _check_int("vocab (the BPE's size)", vocab, 257)
    elif vocab is not None:
        raise PrepareError(f"prepare_corpus: vocab applies to tokenizer='bpe' only, got vocab={vocab!r} "
                           f"with tokenizer={tokenizer!r}")
    workers = workers or len(os.sched_getaffinity(0))
    _check_int("workers", workers, 1)
    corpus = Path(corpus if corpus is not None else default_corpus()).resolve()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tok.tmp*"):  # what a killed writer left (tmm.files' temporary names)
        stale.unlink(missing_ok=True)

    settings = {"corpus": str(corpus), "files": _corpus_fingerprint(corpus), "max_bytes": max_bytes,
                "section_bytes": section_bytes, "stride": max(2, round(1.0 / eval_fraction)),
                "shard_bytes": shard_bytes, "tokenizer": tokenizer if tokenizer in ("byte", "bpe") else "file",
                "vocab": vocab, "bpe_sample_bytes": bpe_sample_bytes if tokenizer == "bpe" else None}
    manifest = read_manifest(out) if (out / MANIFEST).is_file() else None
    if manifest is not None:
        diff = [f"{k}: {manifest['settings'].get(k)!r} there, {v!r} now"
                for k, v in settings.items() if manifest["settings"].get(k) != v]
        if diff:
            raise PrepareError(f"prepare_corpus: {out} holds shards prepared with other settings "
                               f"({'; '.join(diff)}); use another folder or delete it")
    js = _tokenizer_json(tokenizer, vocab, out, corpus, settings, log)
    tok_sha = hashlib.sha256((js or "byte").encode()).hexdigest()
    if manifest is not None and manifest["tokenizer_sha256"] != tok_sha:
        raise PrepareError(f"prepare_corpus: {out} holds shards of another tokenizer (sha256 "
                           f"{manifest['tokenizer_sha256'][:12]}, now {tok_sha[:12]}); use another folder")
    vocab_size = _load_tokenizer(js).vocab_size
    dtype = shard_format.token_dtype(vocab_size)
    if manifest is None:
        manifest = {"format": "tmm-token-shards", "version": 1, "settings": settings, "vocab_size": vocab_size,
                    "dtype": dtype.name, "tokenizer": TOKENIZER if js is not None else "byte",
                    "tokenizer_sha256": tok_sha, "complete": False, "chunks": {}}
        atomic_write_json(out / MANIFEST, manifest)
    done = manifest["chunks"]
    if manifest["complete"]:
        log(f"{out}: already complete ({len(done)} chunks)")
        return manifest
    if done:
        log(f"{out}: resuming, {len(done)} chunks already written")

    t0, tokens, text_bytes = time.monotonic(), 0, 0

    def record(result, bar):
        nonlocal tokens, text_bytes
        index, counts, nbytes = result
        done[str(index)] = {"train": counts["train"], "val": counts["val"], "text_bytes": nbytes}
        atomic_write_json(out / MANIFEST, manifest)
        tokens += counts["train"] + counts["val"]
        text_bytes += nbytes
        bar.update(counts["train"] + counts["val"], shards=len(done))

    chunks = ((i, tr, va) for i, tr, va in _chunks(corpus, max_bytes, section_bytes, settings["stride"], shard_bytes)
              if str(i) not in done)
    with Progress(None, "tokenising", unit="tok", enabled=progress) as bar:
        if workers == 1:
            _init_worker(js)
            for i, tr, va in chunks:
                record(_write_chunk(out, i, tr, va, dtype), bar)
        else:
            _run_pool(chunks, workers, js, out, dtype, lambda r: record(r, bar))
    manifest["complete"] = True
    manifest["chunks"] = dict(sorted(done.items(), key=lambda kv: int(kv[0])))
    atomic_write_json(out / MANIFEST, manifest)
    dt = time.monotonic() - t0
    log(f"{out}: {tokens:,} tokens from {text_bytes:,} bytes in {dt:.1f} s ({tokens / max(dt, 1e-9):,.0f} tokens/s, "
        f"{workers} worker{'s' if workers > 1 else ''}); {len(done)} chunks in all")
    return manifest


def _run_pool(chunks, workers, js, out, dtype, record):
    """Runs _write_chunk over ``chunks`` in ``workers`` processes, at most
    2 x workers chunks in flight (the corpus is read as they finish)."""
    # fork: workers start at once, without importing torch again; they only tokenise.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker,
                                                initargs=(js,)) as pool:
        pending = set()
        for i, tr, va in chunks:
            pending.add(pool.submit(_write_chunk, out, i, tr, va, dtype))
            if len(pending) >= 2 * workers:
                finished, pending = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in finished:
                    record(f.result())
        for f in concurrent.futures.as_completed(pending):
            record(f.result())
