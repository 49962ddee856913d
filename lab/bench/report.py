"""Writing results: a fresh results folder, a JSON document kept on disk as
it grows (atomically, through tmm.files) and PNG plots (matplotlib,
atomically). Tables are tmm.tables'.

LiveJson keeps a results document on disk as it grows: every set() or
add() rewrites the file atomically, so a run killed at any moment leaves the
last complete version (with "complete": false until finish()).
"""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

from tmm.files import atomic_savefig, atomic_write_json

__all__ = ["fresh_folder", "LiveJson", "NO_PLOTS", "pyplot", "save_plot"]


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
