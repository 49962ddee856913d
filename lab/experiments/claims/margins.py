"""The settle rule every verdict uses: a rule's margin over paired seeds.

A rule has a margin, positive where the paper's statement holds (its
tolerance inside it, e.g. "equal or lower" is Hyena + 0.02 - TMM bits per
byte), computed per seed from runs of that seed (the same batches and
initialisation seed on both sides: paired). The verdict is **consistent**
when the mean margin is more than :data:`SPREAD` standard errors above 0
(the standard error of the mean over the paired seeds), **not consistent**
when more than that below, and **unsettled** otherwise, also with one seed
(no spread to compare with). Without any spread (the seeds agree exactly) a
margin of exactly 0 is the rule's boundary: consistent for a rule whose
tolerance is inclusive ("within 1.5x"), not consistent for a strict one
("more often"). The evidence gives the mean margin and twice
its standard error side by side, and for an unsettled rule about how many
paired seeds would settle a margin of that size at that spread.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from .report import CONSISTENT, NOT_CONSISTENT, UNSETTLED, UNTESTED, Verdict

__all__ = ["SPREAD", "Margin", "paired", "combine", "listing", "judged"]

SPREAD = 2.0  # standard errors the mean margin must clear


@dataclasses.dataclass(frozen=True)
class Margin:
    """One rule's margin per paired seed (seed -> value)."""
    values: dict
    unit: str = "bpb"
    digits: int = 4
    strict: bool = True  # a margin of exactly 0 (with no spread) does not hold

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> Optional[float]:
        return sum(self.values.values()) / self.n if self.n else None

    @property
    def se(self) -> Optional[float]:
        """The standard error of the mean (None with fewer than 2 seeds)."""
        if self.n < 2:
            return None
        m = self.mean
        return math.sqrt(sum((v - m) ** 2 for v in self.values.values()) / (self.n - 1) / self.n)

    @property
    def verdict(self) -> str:
        if not self.n:
            return UNTESTED
        if self.se is None:
            return UNSETTLED
        if self.se == 0 and self.mean == 0:
            return NOT_CONSISTENT if self.strict else CONSISTENT
        if self.mean > SPREAD * self.se:
            return CONSISTENT
        if self.mean < -SPREAD * self.se:
            return NOT_CONSISTENT
        return UNSETTLED

    def seeds_to_settle(self) -> Optional[int]:
        """Paired seeds at which a margin of this mean and per-seed spread would clear SPREAD standard errors."""
        if self.se is None or not self.mean:
            return None
        sd = self.se * math.sqrt(self.n)
        return max(self.n + 1, math.ceil((SPREAD * sd / abs(self.mean)) ** 2))

    def text(self) -> str:
        """"margin +0.0123 bpb, 2 SE 0.0045 over 3 paired seeds" (and what would settle it)."""
        if not self.n:
            return "no paired runs"
        unit = f" {self.unit}" if self.unit else ""
        d = self.digits
        if self.se is None:
            return f"margin {self.mean:+.{d}f}{unit} from one seed (no spread)"
        out = f"margin {self.mean:+.{d}f}{unit}, {SPREAD:g} SE {SPREAD * self.se:.{d}f} over {self.n} paired seeds"
        if self.verdict == UNSETTLED:
            need = self.seeds_to_settle()
            out += "" if need is None else f" (a margin this size would settle at about {need} seeds)"
        return out


def paired(a, b, value, *, unit="bpb", digits=4, strict=True) -> Margin:
    """The margin ``value(run_a, run_b)`` per seed over the seeds that Pooled ``a`` and ``b`` both ran
    (``b`` None: ``value(run_a)`` per seed of ``a``); a value of None leaves that seed out."""
    if a is None:
        return Margin({}, unit, digits, strict)
    mine = a.by_seed()
    theirs = None if b is None else b.by_seed()
    values = {}
    for seed, run in mine.items():
        if theirs is not None and seed not in theirs:
            continue
        v = value(run) if theirs is None else value(run, theirs[seed])
        if v is not None:
            values[seed] = v
    return Margin(values, unit, digits, strict)


def combine(margins: dict) -> tuple:
    """One statement held against several rivals (name -> Margin, or None where the rival did not run):
    (verdict, the deciding rival's name or None). Not consistent when one rival's margin is; else not
    tested when a rival did not run; else unsettled when one is; else consistent. The deciding rival is
    the one with the lowest margin among those of the verdict."""
    if not margins:
        return UNTESTED, None
    ran = {k: m for k, m in margins.items() if m is not None and m.n}

    def lowest(verdict):
        names = [k for k, m in ran.items() if m.verdict == verdict]
        return min(names, key=lambda k: ran[k].mean) if names else None

    if lowest(NOT_CONSISTENT):
        return NOT_CONSISTENT, lowest(NOT_CONSISTENT)
    if len(ran) < len(margins):
        return UNTESTED, None
    if lowest(UNSETTLED):
        return UNSETTLED, lowest(UNSETTLED)
    return CONSISTENT, lowest(CONSISTENT)


def listing(margins: dict) -> str:
    """Each rival's margin and 2 SE: "(2 SE) hyena +0.0123 (0.0045), mamba2 not run"."""
    def one(k, m):
        if m is None or not m.n:
            return f"{k} not run"
        d = m.digits
        return f"{k} {m.mean:+.{d}f}" + ("" if m.se is None else f" ({SPREAD * m.se:.{d}f})")
    return f"({SPREAD:g} SE) " + ", ".join(one(k, m) for k, m in margins.items())


def judged(claim: str, verdict: str, margin: Optional[Margin], evidence: str) -> Verdict:
    """A Verdict whose evidence ends with ``margin``'s text and whose margin columns are its numbers."""
    if margin is None or not margin.n:
        return Verdict(claim, verdict, evidence)
    se = margin.se
    return Verdict(claim, verdict, f"{evidence}; {margin.text()}", margin.mean,
                   None if se is None else SPREAD * se, margin.n, margin.unit)
