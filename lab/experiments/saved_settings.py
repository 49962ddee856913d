"""The settings a results folder was made with, checked before the folder is
continued or reused: a comparison's config.json ("args"), a retention run's
summary.json ("args") and a claims job's claims_job.json record them; a
command that resumes the run (or a suite that reads the finished job) must
give the same, but for the runtime settings that change how, not what, it
computes. One check for compare, retention and the claims suite."""
from __future__ import annotations

import json

from .errors import SettingsError

__all__ = ["RESUME_REFUSAL", "differences", "check_same"]

RESUME_REFUSAL = "--resume: give the settings of the run being resumed"


def _plain(v):
    return json.loads(json.dumps(v, default=str))  # as saved: tuples are lists, paths strings


def differences(saved: dict, now: dict, runtime=()) -> list:
    """"--flag: the run had X, this command Y" for each setting both hold
    (a setting added since the run is not one) that differs, runtime ones excepted."""
    keys = sorted(set(saved) & set(now) - set(runtime))
    return [f"--{k.replace('_', '-')}: the run had {saved[k]!r}, this command {now[k]!r}"
            for k in keys if _plain(saved[k]) != _plain(now[k])]


def check_same(saved: dict, now: dict, refusal: str, runtime=()) -> None:
    """SettingsError ``refusal`` followed by the differences, if there are any."""
    diff = differences(saved, now, runtime)
    if diff:
        raise SettingsError(f"{refusal}; it differs in " + "; ".join(diff))
