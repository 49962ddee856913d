"""What the drop-in layers take from the C++ zoo (csrc/models/), so that each
rule has one home: the configuration (keys, defaults and validation: the C++
config reader's) and the initial values (the C++ init)."""
import json
import math

import torch

from .. import _C


def resolve(owner, config, arguments=None):
    """The config dict as the C++ reader resolves it: every key spelled out,
    defaults filled in. Its error, which names the key, as a ValueError of
    `owner`; `arguments` maps a key to the argument that gave it, where the
    two names differ."""
    arguments = arguments or {}
    for key, v in config.items():  # JSON holds no nan or inf: the reader cannot see them
        if isinstance(v, float) and not math.isfinite(v):
            named = f" (argument {arguments[key]})" if key in arguments else ""
            raise ValueError(f'{owner}: key "{key}"{named} must be a finite number, got {v}')
    try:
        return json.loads(_C._resolve_config(json.dumps(config)))
    except RuntimeError as e:
        message = str(e)
        for key, argument in arguments.items():
            message = message.replace(f'key "{key}"', f'key "{key}" (argument {argument})')
        raise ValueError(f"{owner}: {message}") from None


def initial_values(config, part):
    """({name: tensor} parameters, {name: tensor} buffers) of the C++ `part`
    ("mixer", "block", "model", ...) of a resolved config, built alone: its
    initialisation, run by C++ (on the CPU, float32)."""
    params, buffers = _C._initial_values(json.dumps(config), part)
    return dict(params), dict(buffers)


@torch.no_grad()
def load_initial_values(module, config, part, skip=(), values=None):
    """Copies the C++ `part`'s initial values (or `values`, what
    initial_values gave) into module's own parameters and buffers (all of
    them, but those under a prefix in `skip`). Names and shapes must be the
    C++ part's: a difference is this port's bug."""
    params, buffers = values if values is not None else initial_values(config, part)
    values = {**params, **buffers}
    own = dict(module.named_parameters())
    own.update(module.named_buffers())
    for name, t in own.items():
        if name.startswith(tuple(skip)):
            continue
        v = values.get(name)
        if v is None or v.shape != t.shape:
            got = "nothing" if v is None else f"shape {tuple(v.shape)}"
            raise RuntimeError(f"{type(module).__name__}: {name} {tuple(t.shape)} has no C++ counterpart in part "
                               f"\"{part}\" of {config['arch']} (found {got}); tmm.nn and csrc/models differ")
        if not t.is_meta:
            t.copy_(v)
