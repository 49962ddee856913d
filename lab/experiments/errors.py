"""The error an experiment driver raises for bad settings."""

__all__ = ["SettingsError"]


class SettingsError(ValueError):
    """A setting (a command-line flag of the script) is wrong or does not fit
    the others; the message names it, what it got and what it expected.
    Scripts print it after their name and exit with status 2."""
