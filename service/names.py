"""Names people read (campaign names, model names, annotator labels): one rule.

A name must show at least one visible character and may not hide any: text made
only of whitespace (any Unicode ``Zs`` space, tabs, newlines) is refused, and so is
a name containing a control (``Cc``) or invisible formatting character (``Cf``:
zero-width space U+200B, zero-width joiner U+200D, byte-order mark U+FEFF, the
bidirectional overrides U+202A..U+202E, ...). Two model names of one campaign must
differ by their :func:`name_key`, the name after NFKC normalisation with its
whitespace runs collapsed to one space and trimmed: ``"gpt-4"``, ``" gpt-4"``,
``"gpt\u00a04"`` (no-break space) and ``"ｇｐｔ-4"`` (full-width letters) name one
model. Case still counts (``"GPT-4"`` and ``"gpt-4"`` are two names).
"""

from __future__ import annotations

import unicodedata

REFUSED_CATEGORIES = ("Cc", "Cf")


def check_name(value: str) -> str:
    """``value`` if it is a usable name, else ValueError saying why (the API answers 422)."""
    for ch in value:
        if unicodedata.category(ch) in REFUSED_CATEGORIES:
            kind = "a control" if unicodedata.category(ch) == "Cc" else "an invisible formatting"
            raise ValueError(f"must not contain {kind} character (U+{ord(ch):04X})")
    if not name_key(value):
        raise ValueError("must contain a visible character (not only whitespace)")
    return value


def name_key(value: str) -> str:
    """What makes two names the same name: NFKC, invisible characters dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", value)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in REFUSED_CATEGORIES)
    return " ".join(text.split())


def duplicate_names(names: list[str]) -> list[str]:
    """The names that repeat an earlier one's :func:`name_key` (empty when all are distinct)."""
    seen: set[str] = set()
    out = []
    for name in names:
        key = name_key(name)
        if key in seen:
            out.append(name)
        seen.add(key)
    return out
