"""User-facing errors: anything caused by bad input (config, data files, arguments).

Command-line entry points catch `UserError`, print its one-line message and exit with code 2,
so users never see a traceback for a mistake they can fix.
"""
from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input; its message is one line that names the culprit."""

    exit_code = 2


class ConfigError(UserError):
    """Invalid configuration: unknown key, wrong type, unreadable file."""


class DataError(UserError):
    """Invalid data: mismatched line counts, bytes that are not UTF-8, missing files."""
