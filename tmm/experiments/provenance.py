"""Where a run came from and where it ran: the git revision of the checkout
holding this package, the machine and its load, and a fresh results folder.
(tmm.bench's provenance is the benchmarks' counterpart: the two are to become one.)"""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import torch

__all__ = ["CHECKOUT", "git_info", "machine_info", "fresh_folder", "default_results_root", "loaded_note"]

# The source checkout this package was imported from (for an installed
# package: its site-packages folder, where git finds no repository).
CHECKOUT = Path(__file__).resolve().parents[2]


def git_info(repo=CHECKOUT) -> dict:
    """{"revision": HEAD's hash, "dirty": tracked files changed}; None for both outside a git checkout."""
    def git(*a):
        return subprocess.run(["git", *a], cwd=repo, capture_output=True, text=True, timeout=20)

    try:
        rev = git("rev-parse", "HEAD")
        if rev.returncode != 0:
            return {"revision": None, "dirty": None}
        status = git("status", "--porcelain", "--untracked-files=no")
        return {"revision": rev.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"revision": None, "dirty": None}


def machine_info(threads) -> dict:
    info = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "hostname": platform.node(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def loaded_note():
    """A note for the summary when the machine is busy (wall times then are
    inflated and noisy), else None."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    if load > 0.75 * (os.cpu_count() or 1) + 0.5:
        return (f"the machine was loaded at the start (1-minute load average {load:.1f} on "
                f"{os.cpu_count()} CPUs): wall times are inflated and noisy")
    return None


def default_results_root() -> Path:
    """results/ of the source checkout when running from one, else of the working directory."""
    return CHECKOUT / "results" if (CHECKOUT / ".git").exists() else Path.cwd() / "results"


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
