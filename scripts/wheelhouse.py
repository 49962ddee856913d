"""The local wheelhouse of tests/python/test_pip_install.py: wheels, for this
Python, of what README.md's install line installs besides torch, so that pip
in a fresh venv that has only torch resolves them with no package index.

    python scripts/wheelhouse.py CACHE_DIR      prints CACHE_DIR/wheelhouse-<key>

It holds the build tools (pyproject.toml's build-system requires) and tmm's
run-time requirements (requirements-runtime.txt), constrained as this
environment's torch constrains them (torch 2.11 requires setuptools<82: the
newest setuptools would make the install line unresolvable). Downloaded once
per key: the requirements, the constraints and the Python version.
scripts/_env.sh runs it and exports the folder as TMM_WHEELHOUSE.
"""
import ast
import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def requirements():
    build = re.search(r"^requires\s*=\s*(\[.*?\])", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    runtime = [line.strip() for line in (ROOT / "requirements-runtime.txt").read_text().splitlines()
               if line.strip() and not line.lstrip().startswith("#")]
    return ast.literal_eval(build.group(1)) + runtime


def torch_constraints(names):
    """torch's own requirements on any of `names` that hold here, markers dropped."""
    out = []
    for line in importlib.metadata.requires("torch") or ():
        req = Requirement(line)
        if canonicalize_name(req.name) in names and (req.marker is None or req.marker.evaluate({"extra": ""})):
            req.marker = None
            out.append(str(req))
    return sorted(out)


def main(cache):
    reqs = requirements()
    constraints = torch_constraints({canonicalize_name(Requirement(r).name) for r in reqs})
    text = "\n".join(reqs + ["# constraints"] + constraints + [f"# python {sys.version_info[:2]}"])
    folder = Path(cache) / f"wheelhouse-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    if not (folder / ".complete").is_file():
        print(f"downloading the wheelhouse {folder} (the build tools and run-time requirements, once)",
              file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "requirements.txt").write_text("\n".join(reqs) + "\n")
        (folder / "constraints.txt").write_text("\n".join(constraints) + "\n")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(folder),
                        "-r", str(folder / "requirements.txt"), "-c", str(folder / "constraints.txt")], check=True)
        (folder / ".complete").touch()
    print(folder)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/wheelhouse.py CACHE_DIR")
    main(sys.argv[1])
