"""Shared command-line plumbing: logging set-up and the one-line error convention."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable

from utils.errors import RESOURCE_ERRNOS, UserError, resource_error


class _ExamplesFormatter(argparse.HelpFormatter):
    """argparse's own layout, but an epilog of examples keeps its command lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        before, marker, examples = text.partition("examples:\n")
        if not marker:
            return super()._fill_text(text, width, indent)
        lines = "".join(indent + line for line in (marker + examples).splitlines(keepends=True))
        return (super()._fill_text(before, width, indent) + "\n\n" if before.strip() else "") + lines


def with_examples(parser: argparse.ArgumentParser, *lines: str) -> argparse.ArgumentParser:
    """``parser`` whose ``--help`` ends with ``lines``, command lines to paste, under "examples:"."""
    examples = "\n".join(["examples:", *(f"  {line}" for line in lines)])
    parser.epilog = f"{parser.epilog}\n\n{examples}" if parser.epilog else examples
    if parser.formatter_class is argparse.HelpFormatter:
        parser.formatter_class = _ExamplesFormatter
    return parser


def setup_logging(verbose: bool = False) -> None:
    """Log lines as ``HH:MM:SS LEVEL logger: message``; ignite's own (engine runs, epochs, its launcher)
    only at debug (``verbose``): what a person reads is the run's progress, validations and end."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("ignite").setLevel(logging.DEBUG if verbose else logging.WARNING)


def run_main(main: Callable[[], int | None]) -> None:
    """Call ``main``; a ``UserError`` becomes ``error: <message>`` on stderr and exit code 2, as
    does a write the machine refused (disk full, file too large, read-only, no permission)."""
    try:
        code = main()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly; point stdout at /dev/null so the
        # interpreter's final flush does not raise again (Python docs, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except OSError as err:  # after BrokenPipeError, one of its kinds
        if err.errno not in RESOURCE_ERRNOS:
            raise
        # a write refused by the machine somewhere no caller turned it into a UserError
        message = resource_error(err.filename or "a file", err)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(message.exit_code)
    sys.exit(code or 0)
