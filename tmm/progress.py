"""The one progress bar of tmm's long jobs (training, benchmarks, experiments):
tqdm on stderr, with rate and ETA. ``initial`` counts work done before this
bar (a resumed run), so it is not in the rate; ``enabled=False`` draws nothing
(non-zero ranks, quiet runs).

    with Progress(total=1000, desc="tmm", unit="step") as bar:
        bar.update(1, loss=f"{loss:.3f}")
"""
from __future__ import annotations

import sys

from tqdm.auto import tqdm

__all__ = ["Progress"]


class Progress:
    def __init__(self, total: int, desc: str = "", unit: str = "step", initial: int = 0, enabled: bool = True):
        self.total, self.n, self.postfix = total, initial, {}
        self._bar = tqdm(total=total, desc=desc, unit=unit, initial=initial, file=sys.stderr,
                         dynamic_ncols=True, leave=True, disable=not enabled)

    def update(self, n: int = 1, **postfix) -> None:
        """Advance by n units; keyword arguments replace shown values (loss=..., cell=...)."""
        self.n += n
        if postfix:
            self.postfix.update(postfix)
            self._bar.set_postfix(self.postfix, refresh=False)
        self._bar.update(n)

    def describe(self, text: str) -> None:
        """Show what is being worked on now (e.g. the benchmark cell)."""
        self._bar.set_postfix_str(text, refresh=True)

    def close(self) -> None:
        self._bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
