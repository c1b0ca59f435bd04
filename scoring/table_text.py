"""The text of every table: Markdown lines and CSV, written here once for scoring's tables, the
pictures' BLEU-by-length table and the report's (one header rule, one quoting, one line ending
per kind of file)."""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], right: Sequence[bool] = ()) -> list[str]:
    """The lines of a Markdown table: the header, its rule, one line per row (cells as given);
    ``right``: for each column, whether its cells are right-aligned (numbers; default: none)."""
    rule = [" ---: " if i < len(right) and right[i] else " --- " for i in range(len(header))]
    return ["| " + " | ".join(header) + " |", "|" + "|".join(rule) + "|", *("| " + " | ".join(row) + " |" for row in rows)]


def csv_text(*sections: Sequence[Sequence[object]], lineterminator: str = "\r\n") -> str:
    """CSV of ``sections`` (each a header and its rows), an empty line between two sections;
    ``lineterminator``: the csv module's own (RFC 4180) unless a file's readers want plain newlines."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=lineterminator)
    for number, rows in enumerate(sections):
        if number:
            writer.writerow([])
        writer.writerows(rows)
    return buffer.getvalue()
