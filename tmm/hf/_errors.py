"""The one error of tmm.hf for a config it cannot represent: it names the key."""


def unsupported(where, key, got, expected):
    raise ValueError(f'{where}: key "{key}" = {got!r} is not supported; expected {expected}')
