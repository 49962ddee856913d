"""Token shards (tmm.data): the file format round-trips at both
widths and names what is wrong with a bad file; prepare_corpus writes the
lm task's two token streams, the same bytes with any number of workers, and
a run killed midway resumes to byte-identical shards."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tmm.tasks
from tmm.data import PrepareError, ShardFormatError, open_shard, prepare_corpus, read_header, split_shards
from tmm.data import shard_format
from tmm.data.manifest import MANIFEST

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A folder of the FineWeb-edu layout: JSONL files of {"text": ...} documents, and a text file."""
    folder = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    words = ["the", "light", "of", "day", "and", "night", "über", "naïve", "river", "stone", "😀", "word"]
    for f in range(3):
        with open(folder / f"part-{f}.jsonl", "w", encoding="utf-8") as out:
            for d in range(40):
                text = " ".join(rng.choice(words, size=int(rng.integers(50, 400))))
                out.write(json.dumps({"text": f"Doc {f}.{d}: {text}.\n"}) + "\n")
    (folder / "z-notes.txt").write_text("A plain text file is one document.\n" * 50)
    return folder


# ---------------------------------------------------------------- the format


@pytest.mark.parametrize("dtype, high", [(np.uint16, 65535), (np.uint32, 2**32 - 1)])
def test_shard_round_trip(tmp_path, dtype, high):
    tokens = np.random.default_rng(1).integers(0, high, size=10_001, endpoint=True, dtype=np.int64)
    tokens[:2] = [0, high]
    path = tmp_path / "s.tok"
    shard_format.write_shard(path, tokens, dtype)
    header = read_header(path)
    assert header["dtype"] == np.dtype(dtype).newbyteorder("<") and header["count"] == tokens.size
    assert os.path.getsize(path) == 32 + tokens.size * np.dtype(dtype).itemsize
    read = open_shard(path)
    assert isinstance(read, np.memmap) and np.array_equal(read, tokens)


def test_shard_readable_with_numpy_alone(tmp_path):
    """The snippet of docs/training.md: nothing but NumPy."""
    path = tmp_path / "s.tok"
    shard_format.write_shard(path, [5, 6, 7], np.uint16)
    header_dtype = np.dtype([("magic", "S8"), ("version", "<u4"), ("dtype", "<u4"), ("count", "<u8"),
                             ("reserved", "<u8")])
    header = np.fromfile(path, dtype=header_dtype, count=1)[0]
    assert header["magic"] == b"TMMTOKS" and header["version"] == 1 and header["dtype"] == 2
    tokens = np.memmap(path, dtype="<u2" if header["dtype"] == 2 else "<u4", mode="r", offset=32,
                       shape=(int(header["count"]),))
    assert tokens.tolist() == [5, 6, 7]
    assert header_dtype == shard_format.HEADER_DTYPE


def test_empty_shard(tmp_path):
    shard_format.write_shard(tmp_path / "e.tok", np.zeros(0, np.int64), np.uint16)
    assert read_header(tmp_path / "e.tok")["count"] == 0 and open_shard(tmp_path / "e.tok").size == 0


def _corrupt(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage, message", [
    (lambda p: _corrupt(p, 0, b"NOTTOKS\0"), r"bad magic b'NOTTOKS', expected b'TMMTOKS\\x00'"),
    (lambda p: _corrupt(p, 8, np.uint32(7).tobytes()), "format version 7, this code reads version 1"),
    (lambda p: _corrupt(p, 12, np.uint32(3).tobytes()), r"dtype code 3, expected 2 \(uint16\) or 4 \(uint32\)"),
    (lambda p: p.write_bytes(p.read_bytes()[:-2]), "truncated: 230 bytes, expected 232"),
    (lambda p: p.write_bytes(p.read_bytes() + b"xx"), "too long: 234 bytes, expected 232"),
    (lambda p: p.write_bytes(p.read_bytes()[:20]), "truncated: 20 bytes, shorter than the 32-byte header"),
])
def test_bad_shard_errors_name_the_problem(tmp_path, damage, message):
    path = tmp_path / "s.tok"
    shard_format.write_shard(path, np.arange(100), np.uint16)
    damage(path)
    with pytest.raises(ShardFormatError, match=message) as e:
        open_shard(path)
    assert str(path) in str(e.value)


def test_bad_arguments_say_what_they_got():
    with pytest.raises(ValueError, match=r"ids span \[0, 70000\], outside uint16's \[0, 65535\]"):
        shard_format.encode_shard([0, 70000], np.uint16)
    with pytest.raises(ValueError, match="dtype must be uint16 or uint32, got int64"):
        shard_format.encode_shard([1], np.int64)
    with pytest.raises(ValueError, match=r"tokens must be 1-D, got shape \(1, 2\)"):
        shard_format.encode_shard([[1, 2]], np.uint16)
    assert shard_format.token_dtype(65536) == np.uint16 and shard_format.token_dtype(65537) == np.uint32
    with pytest.raises(ValueError, match="vocab_size must be an int in"):
        shard_format.token_dtype(0)


# ---------------------------------------------------------------- prepare_corpus


def _tokens(folder, split):
    paths, counts = split_shards(folder, split)
    assert [open_shard(p).size for p in paths] == counts
    return np.concatenate([np.asarray(open_shard(p)) for p in paths])


def _shard_bytes(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).glob("*.tok"))}


def test_shards_hold_the_lm_tasks_streams(corpus, tmp_path):
    manifest = prepare_corpus(corpus, tmp_path / "s", shard_bytes=20_000, section_bytes=2048, workers=2,
                              progress=False, log=lambda _: None)
    assert manifest["complete"] and len(manifest["chunks"]) > 4 and manifest["dtype"] == "uint16"
    task = tmm.tasks.make("lm", corpus=str(corpus), section_bytes=2048)
    assert np.array_equal(_tokens(tmp_path / "s", "train"), task.train_ids.numpy())
    assert np.array_equal(_tokens(tmp_path / "s", "val"), task.eval_ids.numpy())


def test_bpe_trained_on_a_sample_and_saved(corpus, tmp_path):
    prepare_corpus(corpus, tmp_path / "s", tokenizer="bpe", vocab=300, bpe_sample_bytes=10**9, shard_bytes=30_000,
                   section_bytes=2048, workers=2, progress=False, log=lambda _: None)
    assert (tmp_path / "s" / "tokenizer.json").is_file()
    # A sample larger than the corpus is every training section: the lm task's own BPE.
    task = tmm.tasks.make("lm", corpus=str(corpus), section_bytes=2048, tokenizer="bpe", vocab=300)
    assert np.array_equal(_tokens(tmp_path / "s", "train"), task.train_ids.numpy())
    with pytest.raises(PrepareError, match=r"other settings \(vocab: 300 there, 400 now\)"):
        prepare_corpus(corpus, tmp_path / "s", tokenizer="bpe", vocab=400, bpe_sample_bytes=10**9, shard_bytes=30_000,
                       section_bytes=2048, workers=2, progress=False, log=lambda _: None)
    # A given tokenizer.json is used as it is.
    prepare_corpus(corpus, tmp_path / "t", tokenizer=str(tmp_path / "s" / "tokenizer.json"), shard_bytes=30_000,
                   section_bytes=2048, workers=1, progress=False, log=lambda _: None)
    assert _shard_bytes(tmp_path / "t") == _shard_bytes(tmp_path / "s")


def test_workers_do_not_change_the_bytes(corpus, tmp_path):
    kw = dict(shard_bytes=15_000, section_bytes=1024, progress=False, log=lambda _: None)
    prepare_corpus(corpus, tmp_path / "one", workers=1, **kw)
    prepare_corpus(corpus, tmp_path / "two", workers=2, **kw)
    assert _shard_bytes(tmp_path / "one") == _shard_bytes(tmp_path / "two")


def test_other_settings_are_refused(corpus, tmp_path):
    prepare_corpus(corpus, tmp_path / "s", shard_bytes=50_000, workers=1, progress=False, log=lambda _: None)
    with pytest.raises(PrepareError, match=r"other settings \(shard_bytes: 50000 there, 60000 now\)"):
        prepare_corpus(corpus, tmp_path / "s", shard_bytes=60_000, workers=1, progress=False, log=lambda _: None)


def test_bad_prepare_arguments(corpus, tmp_path):
    with pytest.raises(PrepareError, match="shard_bytes must be an int >= 1, got 0"):
        prepare_corpus(corpus, tmp_path, shard_bytes=0)
    with pytest.raises(PrepareError, match=r"eval_fraction must be in \(0, 0.5\], got 0.9"):
        prepare_corpus(corpus, tmp_path, eval_fraction=0.9)
    with pytest.raises(PrepareError, match="vocab applies to tokenizer='bpe' only, got vocab=300"):
        prepare_corpus(corpus, tmp_path, vocab=300)
    with pytest.raises(PrepareError, match=r"tokenizer must be 'byte', 'bpe' or a tokenizer.json file, got 'nope.json'"):
        prepare_corpus(corpus, tmp_path, tokenizer="nope.json")


def _prepare_command(corpus, out, *extra):
    return [PYTHON, str(REPO / "scripts" / "prepare_corpus.py"), "--corpus", str(corpus), "--out", str(out),
            "--shard-bytes", "15000", "--section-bytes", "1024", "--workers", "2", "--no-progress", *extra]


def test_killed_prepare_resumes_to_the_same_shards(corpus, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    prepare_corpus(corpus, tmp_path / "straight", shard_bytes=15000, section_bytes=1024, workers=2, progress=False,
                   log=lambda _: None)
    expected = _shard_bytes(tmp_path / "straight")
    assert len(expected) >= 10

    # Each chunk takes 0.3 s: killed (the whole process group, workers too) once two are listed as done.
    out = tmp_path / "killed"
    proc = subprocess.Popen(_prepare_command(corpus, out), env={**env, "TMM_PREPARE_CHUNK_DELAY_S": "0.3"},
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(json.loads((out / MANIFEST).read_text())["chunks"]) >= 2:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    manifest = json.loads((out / MANIFEST).read_text())
    finished = len(manifest["chunks"])
    assert not manifest["complete"] and 2 <= finished < len(expected) // 2
    kept = {name: (out / name).stat().st_mtime_ns for name in expected if (out / name).is_file()}

    done = subprocess.run(_prepare_command(corpus, out), env=env, check=True, capture_output=True, text=True)
    assert f"resuming, {finished} chunks already written" in done.stdout
    assert _shard_bytes(out) == expected
    # The chunks the manifest listed were not written again.
    for index in manifest["chunks"]:
        for split in ("train", "val"):
            name = f"{split}-{int(index):05d}.tok"
            assert (out / name).stat().st_mtime_ns == kept[name]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary file left behind
