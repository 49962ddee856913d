"""tmm.files, the one atomic writer: content replaced whole, no temporary left
behind, the folder fsynced after the rename, permissions as a plain open()
gives them (or kept, or set), a failed write leaving the old file."""
import json
import os
import stat

import pytest

from tmm import files


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def leftovers(folder):
    return [p.name for p in folder.iterdir() if ".tmp" in p.name]


def test_writes_replace_whole_files(tmp_path):
    path = tmp_path / "sub" / "a.txt"  # the folder is created
    files.atomic_write_text(path, "one")
    files.atomic_write_text(path, "twö")
    assert path.read_text(encoding="utf-8") == "twö"
    files.atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    files.atomic_write_json(tmp_path / "b.json", {"p": tmp_path, "x": [1, 2]})
    text = (tmp_path / "b.json").read_text()
    assert json.loads(text) == {"p": str(tmp_path), "x": [1, 2]} and text.endswith("}\n") and "\n  " in text
    assert leftovers(tmp_path) == [] and leftovers(path.parent) == []


def test_permissions_default_keep_and_explicit(tmp_path):
    umask = os.umask(0o022)
    try:
        path = tmp_path / "f.txt"
        files.atomic_write_text(path, "x")
        assert mode_of(path) == 0o644  # what open() gives a new file: 0o666 & ~umask (not mkstemp's 0o600)
        os.chmod(path, 0o640)
        files.atomic_write_text(path, "y")
        assert mode_of(path) == 0o644  # a new file replaces it
        os.chmod(path, 0o600)
        files.atomic_write_text(path, "z", mode="keep")
        assert mode_of(path) == 0o600 and path.read_text() == "z"
        files.atomic_write_text(tmp_path / "new.txt", "z", mode="keep")  # nothing to keep: the default
        assert mode_of(tmp_path / "new.txt") == 0o644
        files.atomic_write_text(path, "w", mode=0o664)
        assert mode_of(path) == 0o664
    finally:
        os.umask(umask)
    with pytest.raises(ValueError, match="mode must be"):
        files.atomic_write_text(path, "v", mode="0644")
    assert path.read_text() == "w"


def test_the_folder_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", stat.S_ISDIR(os.fstat(fd).st_mode)))
        real_fsync(fd)

    def replace(a, b):
        events.append(("replace", os.path.basename(b)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    files.atomic_write_text(tmp_path / "f.txt", "x")
    assert events == [("fsync", False), ("replace", "f.txt"), ("fsync", True)]


def test_a_failed_write_leaves_the_old_file(tmp_path):
    path = tmp_path / "f.json"
    files.atomic_write_text(path, "old")

    class Unserialisable:
        def __str__(self):
            raise RuntimeError("cannot")

    with pytest.raises(RuntimeError, match="cannot"):
        files.atomic_write_json(path, {"x": Unserialisable()})
    assert path.read_text() == "old" and leftovers(tmp_path) == []

    class BrokenFigure:
        def savefig(self, f, format, dpi):
            f.write(b"partial")
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        files.atomic_savefig(BrokenFigure(), path)
    assert path.read_text() == "old" and leftovers(tmp_path) == []


def test_savefig_format_follows_the_suffix(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    try:
        files.atomic_savefig(fig, tmp_path / "p.png")
        files.atomic_savefig(fig, tmp_path / "p.svg", dpi=50)
        files.atomic_savefig(fig, tmp_path / "noext")
    finally:
        plt.close(fig)
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (tmp_path / "p.svg").read_bytes()[:400]
    assert (tmp_path / "noext").read_bytes()[:4] == b"\x89PNG"
    assert leftovers(tmp_path) == []
