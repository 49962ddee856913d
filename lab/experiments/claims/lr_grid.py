"""Learning-rate sweeps that bracket each model's best: where a model's best
lies at an edge of its grid, the grid grows past that edge by the factor
``LR_STEP`` (for that model alone, at most ``MAX_EXTENSIONS`` times per
side) until the best is inside it, so the optimum is bracketed (or the
report says it is not). Used by the LM claim (best: lowest eval loss) and
MQAR (best: highest accuracy)."""
from __future__ import annotations

from typing import Callable, Optional

LR_STEP = 3.0  # the grid grows past an edge by this factor ...
MAX_EXTENSIONS = 3  # ... at most this many times per side and model


def past_edge(grid, best: Optional[float], extended: dict) -> Optional[float]:
    """The next learning rate to try for one model whose best over ``grid``
    (its learning rates) is ``best``; None when the best is inside the grid,
    or there is none, or the side it would grow has grown ``MAX_EXTENSIONS``
    times (``extended`` counts per side, "low" / "high")."""
    if best is None:
        return None
    grid = sorted(grid)
    if best == grid[0] and extended["low"] < MAX_EXTENSIONS:
        return float(f"{grid[0] / LR_STEP:.3g}")
    if best == grid[-1] and extended["high"] < MAX_EXTENSIONS:
        return float(f"{grid[-1] * LR_STEP:.3g}")
    return None


def grow(runs: dict, best_of: Callable[[dict], Optional[float]], train: Callable[[float], object]) -> None:
    """Grows one model's sweep ``runs`` (lr -> result, or None where a run
    did not finish) in place: while ``best_of(runs)`` is at an edge,
    ``runs[lr] = train(lr)`` at the next learning rate past it. A grid of one
    learning rate is no sweep (the scale chose that rate) and does not grow."""
    if len(runs) < 2:
        return
    extended = {"low": 0, "high": 0}
    while (lr := past_edge(runs, best_of(runs), extended)) is not None:
        extended["low" if lr < min(runs) else "high"] += 1
        runs[lr] = train(lr)


def sweep(suite, prefix: str, specs: list, lrs, seeds, *, choose, grow_from=None, seeded=None,
          read_later=False, **job) -> tuple:
    """A sweep per model, then more seeds at each model's choice: every model of ``specs`` at every
    learning rate of ``lrs`` on seed 0 (one job ``<prefix>/lr<lr>`` per rate; ``read_later``: a later claim
    reads these jobs' checkpoints), each model's grid grown past an edge (:func:`grow`, judged by
    ``grow_from``, default ``choose``; jobs ``<prefix>/<label>/lr<lr>``), then the other ``seeds`` at the
    rate ``choose`` picks (jobs ``<prefix>/<label>/lr<lr>-seed<k>``; seed 0's run is the sweep's), for the
    labels ``seeded`` (default all). ``job``: the rest of Suite.compare's keywords.
    Returns (label -> lr -> ModelResult or None, label -> chosen lr, label -> Pooled at the chosen lr)."""
    from .results import over_seeds

    jobs = {lr: suite.compare(f"{prefix}/lr{lr:g}", specs, seed=0, lr=lr, read_later=read_later, **job)
            for lr in lrs}
    grids = {m.label: {lr: (jobs[lr] or {}).get(m.label) for lr in lrs} for m in specs}
    for m in specs:
        grow(grids[m.label], grow_from or choose, lambda lr, m=m: (suite.compare(
            f"{prefix}/{m.label}/lr{lr:g}", [m], seed=0, lr=lr, **job) or {}).get(m.label))
    chosen = {m.label: choose(grids[m.label]) or lrs[0] for m in specs}
    pooled = {}
    for m in specs:
        lr = chosen[m.label]
        more = [s for s in seeds if s != 0] if seeded is None or m.label in seeded else []
        runs = [grids[m.label].get(lr)] + [(suite.compare(f"{prefix}/{m.label}/lr{lr:g}-seed{seed}", [m], seed=seed,
                                                          lr=lr, **job) or {}).get(m.label) for seed in more]
        pooled.update(over_seeds([{m.label: r} for r in runs if r is not None]))
    return grids, chosen, pooled
