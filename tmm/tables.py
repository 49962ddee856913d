"""Result tables: GitHub markdown (for reports and docs) or aligned text
(for a terminal). The one table writer of the benchmarks, the experiments,
the claims suite and the evaluation report."""
from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

__all__ = ["markdown_table", "text_table"]


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1,
                   align: Optional[str] = None) -> str:
    """A GitHub markdown table (no trailing newline); the first `left`
    columns are left-aligned, the others right-aligned (numbers); or
    `align`, one letter a column ("l" or "r")."""
    align = align or "l" * left + "r" * (len(head) - left)
    lines = ["| " + " | ".join(str(h) for h in head) + " |",
             "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """The same table as aligned columns for a terminal: the first
    left-aligned, the others right-aligned."""
    rows = [[str(h) for h in head]] + [[str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]

    def fmt(r):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([fmt(rows[0]), "  ".join("-" * w for w in widths)] + [fmt(r) for r in rows[1:]])
