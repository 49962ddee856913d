"""Real text for the language-modelling task: the default corpus (the King
James Bible from Debian packages, written once under ``$TMM_CACHE/corpora/``)
and text, JSONL and Parquet files or folders of them, read whole or streamed
(the tokenizers are tmm.text's; :mod:`tmm.data.lm_tokenizer` adapts them).

    docs = read_documents(default_corpus())      # or iter_documents(path), streamed

docs/training.md, section 1, has the formats and the default corpus.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ..files import atomic_write_text

__all__ = ["default_corpus", "read_documents", "iter_documents", "kjv_to_text", "cache_dir", "split_sections",
           "held_out"]

BIBLE_DATA = "/usr/lib/bible.data"
# The whole text, every book, as one reference range of the `bible` program.
BIBLE_RANGE = "Gen1:1-Rev22:21"
CORPUS_SUFFIXES = (".txt", ".text", ".md", ".jsonl", ".parquet")


def cache_dir() -> Path:
    return Path(os.environ.get("TMM_CACHE") or Path.home() / ".cache" / "tmm")


def kjv_to_text(raw: str) -> str:
    """The `bible` program's output (chapter headings, "  N verse" lines) as
    plain prose: headings kept, verse numbers dropped."""
    out = []
    for line in raw.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        head, _, rest = stripped.partition(" ")
        if line.startswith(" ") and head.isdigit():
            out.append(rest.strip())
        else:  # a chapter heading, e.g. "Genesis 1"
            if out:
                out.append("")
            out.append(stripped)
    return "\n".join(out) + "\n"


def default_corpus() -> Path:
    """The path of the default corpus (written on first use; docs/training.md,
    section 1). Raises FileNotFoundError naming the Debian packages when they
    are not installed."""
    path = cache_dir() / "corpora" / "kjv.txt"
    if path.is_file() and path.stat().st_size > 0:
        return path
    program = shutil.which("bible")
    if program is None or not os.path.isfile(BIBLE_DATA):
        raise FileNotFoundError(
            "the default corpus (the King James Bible) comes from the Debian packages bible-kjv and "
            "bible-kjv-text, which scripts/_env.sh installs: run `apt-get install bible-kjv bible-kjv-text`, "
            "or pass corpus=PATH (a .txt, .jsonl or .parquet file, or a folder of them)"
        )
    raw = subprocess.run(
        [program, "-l100000", BIBLE_RANGE], capture_output=True, check=True, timeout=120,
        env={**os.environ, "PAGER": "cat"}, stdin=subprocess.DEVNULL,
    ).stdout.decode("utf-8", errors="replace")
    text = kjv_to_text(raw)
    if len(text) < 1_000_000:  # the whole Bible is ~4 MB: anything much shorter is a broken install
        raise RuntimeError(f"default corpus: `bible {BIBLE_RANGE}` gave only {len(text)} characters (expected ~4 MB)")
    atomic_write_text(path, text)
    return path


def _corpus_files(path: Path):
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in CORPUS_SUFFIXES)
        if not files:
            raise FileNotFoundError(f"corpus folder '{path}' holds no {', '.join(CORPUS_SUFFIXES)} files")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"no such corpus file or folder: '{path}'")
    return [path]


def _jsonl_texts(path: Path):
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not a JSON line ({e.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise ValueError(f"{path}:{lineno}: expected a JSON object with a string field \"text\"")
            yield obj["text"]


def _parquet_texts(path: Path):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            f"reading '{path}' needs pyarrow (pip install pyarrow, or tmm's extra: tmm[parquet]), which is not installed; "
            "or convert it to JSONL (one {\"text\": ...} object per line)"
        ) from None
    f = pq.ParquetFile(path)
    if "text" not in f.schema_arrow.names:
        raise ValueError(f"{path}: no 'text' column (columns: {', '.join(f.schema_arrow.names)})")
    for batch in f.iter_batches(columns=["text"], batch_size=1024):
        for t in batch.column(0).to_pylist():
            if t is not None:
                yield t


def iter_documents(path, max_bytes: int = 0):
    """The documents (str) of a corpus file or folder, in order, read as they
    are consumed (a corpus larger than memory streams). ``max_bytes`` > 0
    stops once that many UTF-8 bytes are read (the last document cut)."""
    total = 0
    for file in _corpus_files(Path(path)):
        suffix = file.suffix.lower()
        if suffix == ".jsonl":
            texts = _jsonl_texts(file)
        elif suffix == ".parquet":
            texts = _parquet_texts(file)
        else:
            texts = [file.read_bytes().decode("utf-8", errors="replace")]
        for t in texts:
            if max_bytes > 0:
                b = t.encode("utf-8")
                if total + len(b) >= max_bytes:
                    yield b[: max_bytes - total].decode("utf-8", errors="ignore")
                    return
                total += len(b)
            yield t


def read_documents(path, max_bytes: int = 0) -> list:
    """The documents of :func:`iter_documents`, as a list."""
    return list(iter_documents(path, max_bytes))


def split_sections(data: bytes, section_bytes: int) -> list:
    """``data`` cut into pieces of at most ``section_bytes`` bytes, at the last
    newline in each piece's second half when there is one, else at the limit
    moved back to the start of a UTF-8 character. Joined, they give ``data``."""
    out, start, n = [], 0, len(data)
    while start < n:
        end = min(start + section_bytes, n)
        if end < n:
            cut = data.rfind(b"\n", start + section_bytes // 2, end)
            if cut >= 0:
                end = cut + 1
            else:
                while end > start + 1 and (data[end] & 0xC0) == 0x80:  # a continuation byte
                    end -= 1
        out.append(data[start:end])
        start = end
    return out


def held_out(index: int, stride: int) -> bool:
    return index % stride == stride - 1
