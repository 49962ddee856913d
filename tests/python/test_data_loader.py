"""The streaming loader over token shards (tmm.data.ShardLoader):
windows are the shards' tokens, the order is a pure function of the seed,
ranks are disjoint and together cover each epoch, a resumed loader gives the
remaining sequence exactly, and resident memory stays flat over a 1 GiB shard."""
import os

import numpy as np
import pytest
import torch

from tmm.data import ShardLoader, ShardWindows, write_shard
from tmm.data import shard_format
from tmm.data.window_order import window_at

SEQ = 8


@pytest.fixture
def shards(tmp_path):
    """Three shards whose tokens are their global offsets (mod 2**16), of uneven lengths."""
    paths, start = [], 0
    for i, n in enumerate((101, 57, 230)):
        path = tmp_path / f"train-{i:05d}.tok"
        write_shard(path, np.arange(start, start + n) % 65536, np.uint16)
        paths.append(path)
        start += n
    return paths


def test_window_order_is_a_seeded_permutation():
    for n in (1, 2, 3, 7, 64, 1000, 4099):
        assert sorted(window_at(np.arange(n), n, 5, 0).tolist()) == list(range(n))
    a = window_at(np.arange(1000), 1000, 0, 0)
    assert np.array_equal(a, window_at(np.arange(1000), 1000, 0, 0))
    assert not np.array_equal(a, window_at(np.arange(1000), 1000, 1, 0))  # another seed
    assert not np.array_equal(a, window_at(np.arange(1000), 1000, 0, 1))  # another epoch
    assert np.array_equal(window_at([10, 3], 1000, 0, 0), a[[10, 3]])  # any position, alone
    with pytest.raises(ValueError, match=r"positions must lie in \[0, 10\), got \[0, 10\]"):
        window_at([0, 10], 10, 0, 0)


def test_windows_are_the_shards_tokens(shards):
    data = ShardWindows(shards, SEQ)
    per_shard = [(n - 1) // SEQ for n in (101, 57, 230)]
    assert data.num_windows == sum(per_shard)
    starts = [0, 101, 158]
    expected = [np.arange(starts[s] + j * SEQ, starts[s] + j * SEQ + SEQ + 1)
                for s, k in enumerate(per_shard) for j in range(k)]
    assert np.array_equal(data.windows(np.arange(data.num_windows)), np.stack(expected))
    inputs, targets = next(ShardLoader(shards, SEQ, 4))
    assert inputs.dtype == targets.dtype == torch.int64 and inputs.shape == (4, SEQ)
    assert torch.equal(inputs[:, 1:], targets[:, :-1]) and torch.equal(targets - inputs, torch.ones(4, SEQ).long())


def test_the_order_comes_from_the_seed(shards):
    def take(seed, n=10):
        loader = ShardLoader(shards, SEQ, 3, seed=seed)
        return np.concatenate([loader.next_windows() for _ in range(n)])

    assert np.array_equal(take(0), take(0))
    assert not np.array_equal(take(0), take(1))


def test_ranks_are_disjoint_and_cover_each_epoch(shards):
    world, per_rank = 3, 4
    loaders = [ShardLoader(shards, SEQ, per_rank, seed=7, rank=r, world_size=world) for r in range(world)]
    single = ShardLoader(shards, SEQ, per_rank * world, seed=7)
    n = single.num_windows
    starts = []
    for _ in range(2 * n // (per_rank * world) + 2):  # past two epochs, batches straddling the boundaries
        parts = [loader.next_windows() for loader in loaders]
        # The ranks' rows, in rank order, are the single process's global batch.
        assert np.array_equal(np.concatenate(parts), single.next_windows())
        starts.extend(w[0] for part in parts for w in part)
    all_starts = set(ShardWindows(shards, SEQ).windows(np.arange(n))[:, 0].tolist())
    for epoch in range(2):
        seen = starts[epoch * n:(epoch + 1) * n]
        assert len(set(seen)) == n and set(seen) == all_starts
    assert starts[:n] != starts[n:2 * n]  # each epoch has its own order


def test_resume_mid_shard_gives_the_same_remaining_sequence(shards):
    straight = ShardLoader(shards, SEQ, 5, seed=3)
    expected = [next(straight) for _ in range(12)]

    first = ShardLoader(shards, SEQ, 5, seed=3)
    for _ in range(7):
        next(first)
    state = first.state_dict()
    assert state == {"position": 35, "seed": 3, "seq_len": SEQ, "num_windows": first.num_windows}
    resumed = ShardLoader(shards, SEQ, 5, seed=3)
    resumed.load_state_dict(state)
    for want in expected[7:]:
        got = next(resumed)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])

    # The position is global: two ranks of 5 continue a single process of 10 from the same place.
    one = ShardLoader(shards, SEQ, 10, seed=3)
    one.load_state_dict(state)
    ranks = [ShardLoader(shards, SEQ, 5, seed=3, rank=r, world_size=2) for r in range(2)]
    for r in ranks:
        r.load_state_dict(state)
    assert np.array_equal(one.next_windows(), np.concatenate([r.next_windows() for r in ranks]))


def test_bad_arguments_say_what_they_got(shards, tmp_path):
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, world_size=2\), got 2"):
        ShardLoader(shards, SEQ, 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1, got 0"):
        ShardLoader(shards, SEQ, 0)
    loader = ShardLoader(shards, SEQ, 4, seed=1)
    with pytest.raises(ValueError, match="another stream .seed: state 2, loader 1"):
        loader.load_state_dict({**loader.state_dict(), "seed": 2})
    with pytest.raises(ValueError, match="no window of seq_len \\+ 1 = 1001 tokens"):
        ShardWindows(shards, 1000)
    with pytest.raises(FileNotFoundError, match="no manifest.json: not a folder written by"):
        ShardLoader(tmp_path, SEQ, 4)


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_resident_memory_stays_flat_over_a_1gib_shard(tmp_path):
    """A sparse 1 GiB shard (2**29 uint16 tokens, all zero) read at 64k random
    windows of 2 KiB: had the pages read stayed mapped, the process would hold
    at least 256 MiB of them."""
    path = tmp_path / "big.tok"
    count = 2**29
    with open(path, "wb") as f:
        f.write(shard_format.encode_shard(np.zeros(0, np.int64), np.uint16)[:16] + np.uint64(count).tobytes()
                + bytes(8))
        f.truncate(shard_format.HEADER_BYTES + 2 * count)
    assert os.path.getsize(path) >= 2**30
    loader = ShardLoader([path], 1023, 16, seed=0)
    for _ in range(50):  # warm-up: the allocator's and NumPy's steady state
        next(loader)
    before = _rss_bytes()
    peak = before
    for i in range(4000):
        inputs, _ = next(loader)
        if i % 100 == 0:
            peak = max(peak, _rss_bytes())
    peak = max(peak, _rss_bytes())
    assert loader.position == 16 * 4050
    print(f"RSS before {before / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB over {4000 * 16} windows of 1 GiB")
    assert peak - before < 16 * 2**20
