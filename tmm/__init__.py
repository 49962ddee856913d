"""tmm: Toeplitz MLP Mixers and the sub-quadratic models they are compared with.

Importing tmm loads the native library (libtmm_torch), which registers the
operators under ``torch.ops.tmm``; the other public submodules are attributes
imported on first use. The pure-Python parts (``tmm.testing``, ``tmm.files``,
``tmm.tables``) also work where the native module is not built. docs/install.md
says what the package holds; README.md's docs table lists the guides.
"""
import importlib

import torch

_NATIVE = ("io", "models", "nn", "ops", "text", "_C", "__version__", "with_cuda")
# Imported on first attribute access (PEP 562): their dependencies load only when used.
_LAZY = ("data", "distill", "distributed", "eval", "files", "hf", "progress",
         "tables", "tasks", "testing", "train", "train_checkpoints")


def _missing(error):
    """True when `error` says the native module itself is absent (not built),
    as opposed to present but broken."""
    return isinstance(error, ModuleNotFoundError) and error.name in (f"{__name__}._C", f"{__name__}._build_info")


try:
    _build_info = importlib.import_module(f"{__name__}._build_info")
except ModuleNotFoundError as e:
    if not _missing(e):
        raise
    _native_error = e
else:
    if torch.__version__ != _build_info.torch_version:
        raise ImportError(
            f"tmm was built against torch {_build_info.torch_version} but torch {torch.__version__} "
            "is imported; rebuild tmm for this torch (scripts/test.sh, or "
            "pip install --no-build-isolation .)"
        )
    try:
        _C = importlib.import_module(f"{__name__}._C")  # registers torch.ops.tmm
    except ModuleNotFoundError as e:
        if not _missing(e):
            raise
        _native_error = e
    else:
        _native_error = None
        from . import io, models, nn, ops, text  # noqa: E402

        __version__ = _build_info.version
        with_cuda = _build_info.with_cuda

__all__ = ["io", "ops", "nn", "models", "text", "__version__", "with_cuda"]  # the lazy ones stay lazy under *


def _installed_elsewhere():
    """The folder of an installed tmm that this one hides (this one: a clone's
    source folder, first on sys.path as the current directory), or None."""
    from importlib import metadata
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for dist in metadata.distributions(name="tmm"):  # a build's tmm.egg-info in the clone names the clone
        folder = Path(str(dist.locate_file("tmm"))).resolve()
        if folder != here and (folder / "__init__.py").is_file():
            return folder
    return None


def __getattr__(name):
    """Only reached for names not set above: the lazy submodules, and the
    native parts when tmm._C is not built."""
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")  # also sets the attribute
    if name in _NATIVE and _native_error is not None:
        what = "the native module tmm._C is" if name == "_C" else f"tmm.{name} needs the native module tmm._C, which is"
        installed = _installed_elsewhere()
        if installed is not None:
            raise ImportError(
                f"{what} not built in {__path__[0]}, a clone's source folder that the current directory put "
                f"first on sys.path, hiding the installed tmm ({installed}): run Python outside the clone, or build "
                "the clone in place with scripts/test.sh"
            )
        raise ImportError(
            f"{what} not built here ({_native_error}); build it with scripts/test.sh or "
            "pip install --no-build-isolation . (tmm.testing and tmm.files work without it)"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_LAZY))
