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


class ResourceError(UserError):
    """The machine refused a write: disk full, file too large, read-only or permission denied.
    Its message names the path and what to do (exit code 2, as every one-line error)."""


# errno values of a write the machine refused (disk full, quota, file too large, read-only, no permission)
RESOURCE_ERRNOS = frozenset({28, 122, 27, 30, 13, 1})  # ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EPERM


def resource_error(path, err: OSError) -> ResourceError:
    """``cannot write PATH: <reason>; <what to do>`` for an ``OSError`` of a write to ``path``."""
    advice = {28: "free disk space", 122: "free disk space (quota exceeded)",
              27: "raise the file-size limit (ulimit -f) or free space",
              30: "choose a writable folder", 13: "choose a folder you may write to",
              1: "choose a folder you may write to"}.get(err.errno, "check the folder")
    return ResourceError(f"cannot write {path}: {err.strerror or err}; {advice}")
