"""What the layers take from the C++ zoo (csrc/models/), so that each rule has
one home: the configuration (keys, defaults and validation: the C++ config
reader's) and the initial values (the C++ init). A layer is built as a
structure on the meta device, then given the C++ values without a copy."""
import json
import math

import torch

from .. import _C


def resolve(owner, config, arguments=None, arch=None):
    """The config dict as the C++ reader resolves it: every key spelled out,
    defaults filled in. Its error, which names the key, as a ValueError of
    `owner`; `arguments` maps a key to the argument that gave it, where the
    two names differ; `arch`: the architecture the config must have."""
    if arch is not None and config.get("arch") != arch:
        raise ValueError(f'{owner}: "arch" must be "{arch}", got {config.get("arch")!r}')
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
    """{name: tensor}: the parameters and buffers of the C++ `part` ("mixer",
    "block", "model", ...) of a resolved config, built alone and initialised
    by C++ (CPU, float32)."""
    params, buffers = _C._initial_values(json.dumps(config), part)
    return {**dict(params), **dict(buffers)}


def adopt(module, values, device=None, dtype=None):
    """Makes `values` (name -> tensor) the parameters and buffers of `module`
    (built on the meta device) without a copy, then moves it to device and
    dtype. Names and shapes must match: a difference is an error naming it."""
    module.load_state_dict(values, strict=True, assign=True)
    if device is not None or dtype is not None:
        module.to(device=device, dtype=dtype)
    return module


def give(module, values, device=None, dtype=None):
    """`values` as the module's tensors: adopted if the module is on the meta
    device (then moved to device and dtype), else copied into its own."""
    own = module.state_dict(keep_vars=True)
    if next(iter(own.values()), torch.empty(0)).is_meta:
        return adopt(module, values, device, dtype)
    with torch.no_grad():
        for name, t in own.items():
            t.copy_(values[name])
    return module


def initialise(module, config, part, device=None, dtype=None):
    """`module`'s C++ initial values (those of `part` of `config`): adopted at
    construction, copied in by reset_parameters(); a module asked for on the
    meta device keeps no values (deferred, e.g. for FSDP2)."""
    if torch.device(device or "cpu").type == "meta":
        return module
    return give(module, initial_values(config, part), device, dtype)
