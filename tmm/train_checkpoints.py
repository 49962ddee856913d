"""Training checkpoints: everything needed to continue a run exactly where it
stopped (``tmm.train.train`` with ``TrainConfig(checkpoint_dir=..., resume=True)``):
one ``step-*`` folder per saved step and a ``latest`` pointer, written so that
a SIGKILL at any instant leaves a loadable checkpoint.
``TMM_CHECKPOINT_WRITE_DELAY_S`` (seconds, a testing hook) sleeps between a
checkpoint's files. docs/training.md, section 13, has the folder's layout and
why every state a killed writer leaves is safe.
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .files import atomic_write_bytes, atomic_write_text, fsync_dir
from .io import safetensors

__all__ = ["CheckpointError", "save", "latest", "read_state", "load", "list_steps", "rng_state", "set_rng_state"]

LATEST = "latest"
FORMAT = "tmm-train-state"
VERSION = 1
_STEP_DIR = re.compile(r"^step-(\d{8,})$")
_FILES = ("config.json", "model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete or does not fit the model/optimizer."""


def step_dir_name(step: int) -> str:
    return f"step-{int(step):08d}"


def _pause():
    """The testing hook: widens the window in which a kill hits a write."""
    delay = os.environ.get("TMM_CHECKPOINT_WRITE_DELAY_S")
    if delay:
        time.sleep(float(delay))


# ---------------------------------------------------------------- RNG states


def rng_state(generators: Optional[dict] = None):
    """(JSON-able dict, {name: uint8 tensor}) of the Python, NumPy and torch
    (CPU, every CUDA device) RNGs, plus each ``generators[name]`` (a
    ``torch.Generator``, e.g. the task's data stream)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    js = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
    }
    tensors = {"torch.cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch.cuda.{i}"] = s
    for name, g in (generators or {}).items():
        tensors[f"generator.{name}"] = g.get_state()
    return js, tensors


def set_rng_state(js: dict, tensors: dict, generators: Optional[dict] = None):
    """Restores what :func:`rng_state` returned; each ``generators[name]`` must
    have been saved."""
    version, internal, gauss = js["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = js["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(tensors["torch.cpu"])
    cuda = sorted(k for k in tensors if k.startswith("torch.cuda."))
    if cuda and torch.cuda.is_available():
        for k in cuda:
            i = int(k.rsplit(".", 1)[1])
            if i < torch.cuda.device_count():
                torch.cuda.set_rng_state(tensors[k], i)
    for name, g in (generators or {}).items():
        key = f"generator.{name}"
        if key not in tensors:
            raise CheckpointError(f"the checkpoint has no state for the generator '{name}' (it has: {sorted(tensors)})")
        g.set_state(tensors[key])


# ---------------------------------------------------------------- optimizer


def _optimizer_parts(optimizer):
    """({name: tensor}, JSON-able rest) of ``optimizer.state_dict()``."""
    sd = optimizer.state_dict()
    tensors, other = {}, {}
    for index, st in sd["state"].items():
        for key, v in st.items():
            if isinstance(v, torch.Tensor):
                tensors[f"state.{index}.{key}"] = v
            else:
                other.setdefault(str(index), {})[key] = v
    groups = []
    for g in sd["param_groups"]:
        groups.append({k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()})
    return tensors, {"param_groups": groups, "other_state": other}


def _optimizer_state_dict(tensors, js):
    state = {}
    for name, t in tensors.items():
        _, index, key = name.split(".", 2)
        state.setdefault(int(index), {})[key] = t
    for index, st in js["other_state"].items():
        state.setdefault(int(index), {}).update(st)
    # JSON turned tuples (AdamW's betas) into lists; give them back as they were.
    groups = [{k: (tuple(v) if isinstance(v, list) and k != "params" else v) for k, v in g.items()}
              for g in js["param_groups"]]
    return {"state": state, "param_groups": groups}


def _param_names(model, optimizer):
    """The parameters' names in the optimizer's order (how its state is indexed)."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = []
    for g in optimizer.param_groups:
        for p in g["params"]:
            if id(p) not in names:
                raise CheckpointError("the optimizer holds a parameter that is not one of the model's")
            out.append(names[id(p)])
    return out


# ---------------------------------------------------------------- save


def list_steps(root) -> list:
    """The steps of the ``step-*`` folders (all complete) in ``root``, sorted."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name)))


def _distributed_state(model, optimizer):
    """The model's (and optimizer's) state dicts of a sharded (FSDP2) model:
    each rank's shards, as torch.distributed.checkpoint saves and loads them."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

    if optimizer is None:
        return {"model": get_model_state_dict(model)}
    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optimizer": optim_sd}


def save(root, step: int, model, optimizer, state: dict, generators: Optional[dict] = None, keep: int = 2,
         sharded: bool = False, files: Optional[dict] = None) -> Path:
    """Writes the checkpoint of ``step`` into ``root`` (docs/training.md,
    section 13) and returns its folder. ``state`` is any JSON-able dict
    (metrics, counters); ``generators`` are ``torch.Generator`` s whose
    states are saved by name; ``files`` ({file name: text}) are written
    beside them. Keeps the ``keep`` (>= 1) newest checkpoints.
    ``sharded``: an FSDP2 model, saved by every rank together (rank 0 writes
    all but the shards)."""
    if keep < 1:
        raise ValueError(f"save: keep must be >= 1, got {keep}")
    clash = sorted(set(files or ()) & set(_FILES))
    if clash:
        raise ValueError(f"save: files {clash} are the checkpoint's own")
    root = Path(root)
    main = not sharded or torch.distributed.get_rank() == 0
    name = step_dir_name(step)
    tmp = root / f".tmp-{name}"  # one name for every rank
    if main:
        root.mkdir(parents=True, exist_ok=True)
        for p in root.iterdir():  # what a killed writer left
            if p.name.startswith((".tmp-step-", ".del-step-")):
                shutil.rmtree(p, ignore_errors=True)
            elif p.name.startswith(f".{LATEST}.tmp"):
                p.unlink(missing_ok=True)
        tmp.mkdir()
    if sharded:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        torch.distributed.barrier()
        dcp.save(_distributed_state(model, optimizer), checkpoint_id=tmp / "dcp")
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if main:
            from . import models

            models.save_checkpoint(model.config, full, tmp)
    else:
        model.save(tmp)  # config.json + model.safetensors, each written and fsynced by C++
        _pause()
        opt_tensors, opt_js = _optimizer_parts(optimizer)
        safetensors.save_file(opt_tensors, tmp / "optimizer.safetensors", {"format": FORMAT})
    if main:
        _pause()
        rng_js, rng_tensors = rng_state(generators)
        safetensors.save_file(rng_tensors, tmp / "rng.safetensors", {"format": FORMAT})
        _pause()
        meta = {"format": FORMAT, "version": VERSION, "step": int(step), "sharded": sharded,
                "param_names": _param_names(model, optimizer), "rng": rng_js}
        if not sharded:
            meta["optimizer"] = opt_js
        clash = sorted(set(meta) & set(state))
        if clash:
            raise ValueError(f"save: state keys {clash} are reserved")
        atomic_write_text(tmp / "state.json", json.dumps({**meta, **state}) + "\n")
        for file_name, text in (files or {}).items():
            atomic_write_text(tmp / file_name, text)
        fsync_dir(tmp)
        _pause()

        final = root / name
        if final.exists():  # written by a run killed before it moved `latest`, which names an older step
            _delete(final)
        os.rename(tmp, final)
        fsync_dir(root)
        _pause()
        atomic_write_bytes(root / LATEST, (name + "\n").encode())

        kept = [s for s in list_steps(root) if s <= step][-keep:]
        for s in list_steps(root):
            if s not in kept:
                _delete(root / step_dir_name(s))
    if sharded:
        torch.distributed.barrier()
    return root / name


def _delete(folder):
    """Renames, then deletes: a killed deletion leaves a `.del-*` folder, never
    a half-deleted `step-*` one."""
    trash = folder.with_name(f".del-{folder.name}-{os.getpid()}")
    os.rename(folder, trash)
    shutil.rmtree(trash, ignore_errors=True)


# ---------------------------------------------------------------- load


def _is_sharded(model):
    return any(hasattr(p, "placements") for p in model.parameters())


def latest(root) -> Optional[Path]:
    """The folder ``root/latest`` names, or None when there is no checkpoint
    yet (no ``latest`` file). A pointer to a missing or incomplete folder is
    a :class:`CheckpointError`."""
    root = Path(root)
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    name = pointer.read_text().strip()
    if not _STEP_DIR.match(name):
        raise CheckpointError(f"{pointer} holds {name!r}, not a checkpoint folder name like 'step-00000012'")
    path = root / name
    missing = [f for f in _FILES if not (path / f).is_file()
               and not (f == "optimizer.safetensors" and (path / "dcp").is_dir())]
    if missing:
        raise CheckpointError(f"{pointer} names {path}, which lacks {', '.join(missing)}")
    return path


def read_state(path) -> dict:
    """The ``state.json`` of the checkpoint folder ``path`` (step, metrics,
    and what :func:`save` was given as ``state``)."""
    path = Path(path)
    try:
        state = json.loads((path / "state.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path / 'state.json'}: cannot be read: {e}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{path / 'state.json'}: not a training checkpoint (format {FORMAT!r})")
    if state.get("version") != VERSION:
        raise CheckpointError(f"{path / 'state.json'}: version {state.get('version')!r}, this code reads {VERSION}")
    return state


def load(path, model, optimizer=None, generators: Optional[dict] = None) -> dict:
    """Loads the checkpoint folder ``path`` into ``model`` (copied in place),
    ``optimizer`` and the RNGs (global ones and each ``generators[name]``);
    returns its state dict (:func:`read_state`). Everything is checked
    against the model and optimizer before anything is changed."""
    path = Path(path)
    state = read_state(path)
    saved_config = json.loads((path / "config.json").read_text())
    config = model.config
    diff = sorted(k for k in set(saved_config) | set(config) if saved_config.get(k) != config.get(k))
    if diff:
        details = ", ".join(f"{k}: checkpoint {saved_config.get(k)!r}, model {config.get(k)!r}" for k in diff)
        raise CheckpointError(f"{path}: the checkpoint's model config differs from the model's ({details})")
    sharded = bool(state.get("sharded"))
    if sharded != _is_sharded(model):
        raise CheckpointError(f"{path}: a {'sharded (FSDP2)' if sharded else 'whole-model'} checkpoint, and the model "
                              f"is {'sharded' if _is_sharded(model) else 'not'}: resume it as it was run")
    weights = None if sharded else safetensors.load_file(path / "model.safetensors")[0]
    opt_sd = None
    if optimizer is not None:
        names = _param_names(model, optimizer)
        if names != state["param_names"]:
            raise CheckpointError(
                f"{path}: the optimizer's parameters ({len(names)}) are not the checkpoint's "
                f"({len(state['param_names'])}) in the same order"
            )
        if not sharded:
            opt_tensors, _ = safetensors.load_file(path / "optimizer.safetensors")
            opt_sd = _optimizer_state_dict(opt_tensors, state["optimizer"])
    rng_tensors, _ = safetensors.load_file(path / "rng.safetensors")
    missing = [n for n in (generators or {}) if f"generator.{n}" not in rng_tensors]
    if missing:
        raise CheckpointError(f"{path}: no saved state for the generator(s) {missing}")

    if sharded:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict

        shards = _distributed_state(model, optimizer)
        dcp.load(shards, checkpoint_id=path / "dcp")
        if optimizer is None:
            set_model_state_dict(model, shards["model"])
        else:
            set_state_dict(model, optimizer, model_state_dict=shards["model"], optim_state_dict=shards["optimizer"])
    else:
        model.load_state_dict(weights)  # checks every name and shape before copying
        if opt_sd is not None:
            optimizer.load_state_dict(opt_sd)
    set_rng_state(state["rng"], rng_tensors, generators)
    return state
