"""The order in which an epoch visits ``n`` windows: a pseudo-random
permutation of ``range(n)``, a pure function of (seed, epoch, n), evaluated
at any position in O(1) memory (a 6-round Feistel network, cycle-walked into
range; docs/training.md, section 3).

    window_at(positions, n, seed, epoch)     # the windows at those places of the epoch's order
"""
from __future__ import annotations

import numpy as np

__all__ = ["window_at"]

ROUNDS = 6
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x):
    """SplitMix64's finaliser: a bijective scramble of uint64 (wrapping multiplies)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _feistel(x, keys, half, mask):
    left, right = x >> half, x & mask
    for k in keys:
        left, right = right, left ^ (_mix(right ^ k) & mask)
    return (left << half) | right


def window_at(positions, n: int, seed: int, epoch: int) -> np.ndarray:
    """The window indices (int64) at ``positions`` (ints in [0, n)) of epoch
    ``epoch``'s order of ``n`` windows under ``seed``."""
    positions = np.asarray(positions, dtype=np.int64)
    if n < 1:
        raise ValueError(f"window_at: n must be >= 1 window, got {n}")
    if positions.size and (positions.min() < 0 or positions.max() >= n):
        raise ValueError(f"window_at: positions must lie in [0, {n}), got [{positions.min()}, {positions.max()}]")
    if n == 1:
        return np.zeros_like(positions)
    bits = max(2, (n - 1).bit_length())
    bits += bits % 2
    half, mask = np.uint64(bits // 2), np.uint64((1 << (bits // 2)) - 1)
    keys = np.random.SeedSequence([int(seed), int(epoch)]).generate_state(ROUNDS, dtype=np.uint64)
    with np.errstate(over="ignore"):
        out = _feistel(positions.astype(np.uint64), keys, half, mask)
        walking = out >= np.uint64(n)
        while walking.any():
            out[walking] = _feistel(out[walking], keys, half, mask)
            walking = out >= np.uint64(n)
    return out.astype(np.int64)
