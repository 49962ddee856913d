"""Writing results: a fresh results folder, tables (markdown, or aligned
text for a terminal), JSON (atomically, through tmm.files) and PNG plots
(matplotlib, atomically).

LiveJson keeps a results document on disk as it grows: every set() or
add() rewrites the file atomically, so a run killed at any moment leaves the
last complete version (with "complete": false until finish()).
"""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..files import atomic_savefig, atomic_write_json, atomic_write_text

__all__ = ["fresh_folder", "markdown_table", "text_table", "LiveJson", "write_json", "write_text", "pyplot", "save_plot"]

write_json = atomic_write_json
write_text = atomic_write_text


def fresh_folder(root, name) -> Path:
    """``root/<name>-<timestamp>``, with a counter when that exists already (not created)."""
    root = Path(root)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = root / f"{name}-{stamp}"
    k = 1
    while out.exists():
        k += 1
        out = root / f"{name}-{stamp}-{k}"
    return out


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


class LiveJson:
    """A JSON document rewritten on every change (see the module docstring)."""

    def __init__(self, path, data: Optional[Dict[str, Any]] = None):
        self.path = Path(path)
        self.data: Dict[str, Any] = {"complete": False, **(data or {})}
        self.flush()

    def flush(self) -> None:
        atomic_write_json(self.path, self.data)

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.flush()

    def add(self, section: str, record: Dict[str, Any]) -> None:
        """Append a record to the list data[section]."""
        self.data.setdefault(section, []).append(record)
        self.flush()

    def section(self, name: str) -> List[Dict[str, Any]]:
        return self.data.setdefault(name, [])

    def finish(self) -> None:
        self.data["complete"] = True
        self.flush()


NO_PLOTS = "no plots: matplotlib is not installed (pip install matplotlib, or tmm's extra: tmm[plots])"


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None where matplotlib is
    missing (callers then note NO_PLOTS)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - any import failure means no plot
        return None
    return plt


def save_plot(fig, path, dpi: int = 110) -> None:
    """The figure as a PNG, written atomically; the figure is closed."""
    import matplotlib.pyplot as plt

    atomic_savefig(fig, path, dpi=dpi)
    plt.close(fig)
