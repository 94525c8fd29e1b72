"""CSV files a spreadsheet opens safely: the one writer of every CSV the project produces.

A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a
formula to Excel, LibreOffice and Google Sheets (CSV or formula injection): a model
named ``=1+2`` or ``@SUM(A1)`` would be evaluated when the export is opened. Such a
cell gets a leading single quote, as OWASP's "CSV Injection" page recommends, so the
spreadsheet shows it as text (``'=1+2``). Numbers are written as numbers: a negative
win-rate difference stays ``-0.25``; only ``str`` cells are escaped. The first
character is compared after Unicode compatibility normalisation (NFKC), so the
full-width and small forms (``＝``, ``＋``, ``－``, ``＠``, ``﹦``) and the minus sign
``−`` count as the characters they stand for: spreadsheets in East Asian locales
read ``＝1+2`` as a formula.
"""

from __future__ import annotations

import csv
import unicodedata
from typing import Any, Iterable, Mapping, Sequence, TextIO

#: First characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: Characters NFKC leaves alone that a spreadsheet may still read as a formula's start (the minus sign).
_ALSO_FORMULA = ("\u2212",)


def _formula_start(value: str) -> bool:
    first = value[:1]
    return unicodedata.normalize("NFKC", first).startswith(FORMULA_STARTS) or first in _ALSO_FORMULA


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: ``None`` is empty, text starting like a formula gets a leading ``'``,
    anything else (numbers, booleans) is left to the writer."""
    if value is None:
        return ""
    if isinstance(value, str) and _formula_start(value):
        return "'" + value
    return value


def write_csv(
    out: TextIO, columns: Sequence[str], rows: Iterable[Mapping[str, Any]], lineterminator: str = "\n"
) -> None:
    """``columns`` as the header, then one line per row (missing keys empty, extra keys ignored),
    every cell through :func:`csv_cell`."""
    w = csv.writer(out, lineterminator=lineterminator)
    w.writerow([csv_cell(c) for c in columns])
    for row in rows:
        w.writerow([csv_cell(row.get(k)) for k in columns])
