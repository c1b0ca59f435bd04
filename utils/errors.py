"""User-facing errors: anything caused by bad input (config, data files, arguments).

Command-line entry points catch `UserError`, print its one-line message and exit with code 2,
so users never see a traceback for a mistake they can fix.
"""
from __future__ import annotations

import errno


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


# what the machine says when it refuses a write, and what to do about it
_RESOURCE_ADVICE = {errno.ENOSPC: "free disk space", errno.EDQUOT: "free disk space (quota exceeded)",
                    errno.EFBIG: "raise the file-size limit (ulimit -f) or free space",
                    errno.EROFS: "choose a writable folder", errno.EACCES: "choose a folder you may write to",
                    errno.EPERM: "choose a folder you may write to"}
RESOURCE_ERRNOS = frozenset(_RESOURCE_ADVICE)


def resource_error(path, err: OSError) -> ResourceError:
    """``cannot write PATH: <reason>; <what to do>`` for an ``OSError`` of a write to ``path``."""
    advice = _RESOURCE_ADVICE.get(err.errno, "check the folder")
    return ResourceError(f"cannot write {path}: {err.strerror or err}; {advice}")
