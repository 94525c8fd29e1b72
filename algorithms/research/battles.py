"""Streaming reader of FastChat / LMArena battle logs and preference-matrix builder.

A battle log is a sequence of records with ``model_a``, ``model_b`` and ``winner``
(one of ``model_a``, ``model_b``, ``tie``, ``tie (bothbad)``), stored as

* CSV with a header row,
* a JSON array of objects (FastChat's ``clean_battle_*.json``), or
* JSON Lines (one object per line),

optionally gzip-compressed (``.gz``). Records are parsed one at a time: CSV and JSONL
line by line, JSON arrays with :meth:`json.JSONDecoder.raw_decode` over fixed-size
chunks, so a log with hundreds of thousands of battles never exists as a list of
Python objects. Only per-pair counters are kept.

:func:`count_battles` returns raw counters; :func:`build_preference` turns them into a
preference matrix under a tie policy (``drop``: ties are not comparisons; ``half``:
a tie is half a win for each side), keeps pairs with at least ``min_comparisons``
comparisons, and, when some pairs lack data, restricts to the largest subset of
models in which every pair is compared (maximum clique, exact by Bron-Kerbosch with
pivoting within a search budget, greedy beyond it).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

__all__ = [
    "WINNER_VALUES",
    "BattleLogError",
    "BattleCounts",
    "PreferenceData",
    "sniff_format",
    "iter_battles",
    "count_battles",
    "build_preference",
    "largest_complete_subset",
    "load_preference",
]

WINNER_VALUES = ("model_a", "model_b", "tie", "tie (bothbad)")
TIE_POLICIES = ("drop", "half")
_CHUNK = 1 << 16


class BattleLogError(ValueError):
    """Unreadable or unusable battle log (message is one line, fit for a CLI)."""


# --------------------------------------------------------------------------- reading


def _open_text(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, "r", encoding="utf-8", newline="")


def _first_char(f: IO[str]) -> str:
    while True:
        chunk = f.read(4096)
        if not chunk:
            return ""
        s = chunk.lstrip()
        if s:
            return s[0]


def _read_first_value(f: IO[str], limit: int = 64 << 20) -> Any:
    dec = json.JSONDecoder()
    buf = ""
    size = _CHUNK
    while True:
        chunk = f.read(size)
        buf += chunk
        s = buf.lstrip()
        try:
            value, _ = dec.raw_decode(s)
            return value
        except json.JSONDecodeError:
            if not chunk or len(buf) > limit:
                raise
            size = min(size * 2, 8 << 20)


def sniff_format(path: str) -> str:
    """Guess the format of ``path``: ``csv``, ``json`` (array), ``jsonl`` or ``instance``.

    ``instance`` is a single JSON object with a ``preference`` key (an llmduel
    instance file). Raises :class:`BattleLogError` if the file cannot be read.
    """
    if not os.path.isfile(path):
        raise BattleLogError(f"no such file: {path}")
    base = path[:-3] if path.endswith(".gz") else path
    ext = os.path.splitext(base)[1].lower()
    try:
        with _open_text(path) as f:
            c = _first_char(f)
        if not c:
            raise BattleLogError(f"{path} is empty")
        if c == "[":
            return "json"
        if c == "{":
            with _open_text(path) as f:
                try:
                    first = _read_first_value(f)
                except json.JSONDecodeError as e:
                    raise BattleLogError(f"{path}: invalid JSON ({e.msg})") from None
            if isinstance(first, dict) and "preference" in first:
                return "instance"
            return "jsonl"
    except UnicodeDecodeError:
        raise BattleLogError(f"{path} is not UTF-8 text") from None
    except OSError as e:
        raise BattleLogError(f"cannot read {path}: {e.strerror or e}") from None
    if ext in (".jsonl", ".ndjson"):
        return "jsonl"
    return "csv"


def _iter_json_array(f: IO[str]) -> Iterator[Any]:
    """Yield the objects of a top-level JSON array, reading ``f`` in chunks."""
    dec = json.JSONDecoder()
    buf = ""
    pos = 0
    eof = False
    size = _CHUNK

    def more() -> bool:
        nonlocal buf, pos, eof, size
        if eof:
            return False
        chunk = f.read(size)
        if not chunk:
            eof = True
            return False
        buf = buf[pos:] + chunk
        pos = 0
        return True

    def skip_ws() -> bool:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf):
                return True
            if not more():
                return False

    if not skip_ws() or buf[pos] != "[":
        raise BattleLogError("JSON log must be an array of battle objects")
    pos += 1
    expect_value = True
    first = True
    while True:
        if not skip_ws():
            raise BattleLogError("JSON log ends before the closing ']'")
        ch = buf[pos]
        if ch == "]":
            if expect_value and not first:
                raise BattleLogError("JSON log has a trailing comma")
            pos += 1
            if skip_ws():
                raise BattleLogError("unexpected data after the JSON array")
            return
        if not expect_value:
            if ch != ",":
                raise BattleLogError(f"expected ',' between JSON array elements, got {ch!r}")
            pos += 1
            expect_value = True
            continue
        if ch != "{":
            raise BattleLogError("JSON log elements must be objects")
        while True:
            try:
                obj, end = dec.raw_decode(buf, pos)
                break
            except json.JSONDecodeError as e:
                if eof or not more():
                    raise BattleLogError(f"invalid JSON in battle log: {e.msg}") from None
                size = min(size * 2, 8 << 20)  # one object larger than the buffer: read more
        pos = end
        yield obj
        first = False
        expect_value = False


def _iter_jsonl(f: IO[str]) -> Iterator[Any]:
    for lineno, line in enumerate(f, 1):
        s = line.strip()
        if not s:
            continue
        try:
            yield json.loads(s)
        except json.JSONDecodeError as e:
            raise BattleLogError(f"invalid JSON on line {lineno}: {e.msg}") from None


def _iter_csv(f: IO[str]) -> Iterator[dict]:
    reader = csv.DictReader(f)
    cols = reader.fieldnames or []
    missing = [c for c in ("model_a", "model_b", "winner") if c not in cols]
    if missing:
        raise BattleLogError(f"CSV log lacks column(s): {', '.join(missing)}")
    yield from reader


def iter_battles(path: str, fmt: str | None = None) -> Iterator[Any]:
    """Yield raw battle records (dicts) from ``path``, streaming.

    ``fmt`` is ``csv``, ``json``, ``jsonl`` or ``None`` (guess with :func:`sniff_format`).
    """
    fmt = fmt or sniff_format(path)
    if fmt == "instance":
        raise BattleLogError(f"{path} is an instance file, not a battle log")
    readers = {"csv": _iter_csv, "json": _iter_json_array, "jsonl": _iter_jsonl}
    if fmt not in readers:
        raise BattleLogError(f"unknown battle-log format {fmt!r} (csv, json, jsonl)")
    try:
        with _open_text(path) as f:
            yield from readers[fmt](f)
    except UnicodeDecodeError:
        raise BattleLogError(f"{path} is not UTF-8 text") from None
    except csv.Error as e:
        raise BattleLogError(f"{path}: malformed CSV ({e})") from None
    except OSError as e:
        raise BattleLogError(f"cannot read {path}: {e.strerror or e}") from None


# --------------------------------------------------------------------------- counting


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


@dataclass
class BattleCounts:
    """Raw counters from a battle log.

    ``wins[i, j]``: decisive battles i won against j; ``ties[i, j]`` (symmetric):
    ``tie`` battles; ``bothbad[i, j]`` (symmetric): ``tie (bothbad)`` battles.
    ``stats``: rows read, used, and skipped by reason.
    """

    names: list[str]
    wins: np.ndarray
    ties: np.ndarray
    bothbad: np.ndarray
    stats: dict = field(default_factory=dict)

    def subset(self, models: Sequence[str]) -> "BattleCounts":
        idx = [self.names.index(m) for m in models]
        ix = np.ix_(idx, idx)
        return BattleCounts(
            list(models), self.wins[ix].copy(), self.ties[ix].copy(), self.bothbad[ix].copy(), dict(self.stats)
        )


def count_battles(
    source: str | Iterable[Any],
    fmt: str | None = None,
    *,
    model_filter: Callable[[str], bool] | None = None,
    anony_only: bool = False,
) -> BattleCounts:
    """Count wins and ties per ordered pair, streaming over ``source``.

    ``source`` is a path or an iterable of records. Records with a missing model,
    an unknown ``winner`` or ``model_a == model_b`` are skipped and counted in
    ``stats``; ``model_filter`` keeps only battles where both models pass it;
    ``anony_only`` keeps records whose ``anony`` field is true.
    """
    records = iter_battles(source, fmt) if isinstance(source, (str, os.PathLike)) else source
    index: dict[str, int] = {}
    pair: dict[tuple[int, int], list[int]] = {}
    stats = {
        "rows": 0,
        "used": 0,
        "decisive": 0,
        "tie": 0,
        "tie (bothbad)": 0,
        "skipped_invalid": 0,
        "skipped_self": 0,
        "skipped_filter": 0,
        "skipped_named": 0,
    }
    for rec in records:
        stats["rows"] += 1
        if not isinstance(rec, dict):
            stats["skipped_invalid"] += 1
            continue
        a, b, w = rec.get("model_a"), rec.get("model_b"), rec.get("winner")
        if not isinstance(a, str) or not isinstance(b, str) or not a or not b or w not in WINNER_VALUES:
            stats["skipped_invalid"] += 1
            continue
        if a == b:
            stats["skipped_self"] += 1
            continue
        if anony_only and not _truthy(rec.get("anony", False)):
            stats["skipped_named"] += 1
            continue
        if model_filter is not None and not (model_filter(a) and model_filter(b)):
            stats["skipped_filter"] += 1
            continue
        ia = index.setdefault(a, len(index))
        ib = index.setdefault(b, len(index))
        key = (ia, ib) if ia < ib else (ib, ia)
        c = pair.setdefault(key, [0, 0, 0, 0])  # low wins, high wins, tie, bothbad
        if w == "model_a" or w == "model_b":
            winner = ia if w == "model_a" else ib
            c[0 if winner == key[0] else 1] += 1
            stats["decisive"] += 1
        elif w == "tie":
            c[2] += 1
            stats["tie"] += 1
        else:
            c[3] += 1
            stats["tie (bothbad)"] += 1
        stats["used"] += 1
    # sort models by name for a stable order
    names = sorted(index)
    remap = np.empty(len(index), dtype=int)
    for new, n in enumerate(names):
        remap[index[n]] = new
    L = len(names)
    W = np.zeros((L, L))
    T = np.zeros((L, L))
    B = np.zeros((L, L))
    for (lo, hi), (wl, wh, t, bb) in pair.items():
        i, j = remap[lo], remap[hi]
        W[i, j] += wl
        W[j, i] += wh
        T[i, j] = T[j, i] = t
        B[i, j] = B[j, i] = bb
    return BattleCounts(names, W, T, B, stats)


# --------------------------------------------------------------------------- subsets


def largest_complete_subset(
    adj: np.ndarray, weight: np.ndarray | None = None, budget: int = 200_000
) -> tuple[list[int], str]:
    """Largest set of vertices with every pair adjacent (a maximum clique).

    Exact Bron-Kerbosch with pivoting while the number of recursive calls stays
    within ``budget``; otherwise a greedy peel (repeatedly drop the vertex with the
    fewest neighbours in the remaining set). Among cliques of equal size the one with
    the largest total ``weight`` (e.g. comparisons) wins. Returns ``(sorted vertices,
    method)`` with method ``"exact"`` or ``"greedy"``.
    """
    A = np.asarray(adj, dtype=bool).copy()
    np.fill_diagonal(A, False)
    n = A.shape[0]
    if n == 0:
        return [], "exact"
    Wt = np.zeros((n, n)) if weight is None else np.asarray(weight, dtype=float)
    nbrs = [set(np.flatnonzero(A[v]).tolist()) for v in range(n)]
    best: list = [[], -1.0]
    calls = [0]

    def score(c: list[int]) -> float:
        return float(Wt[np.ix_(c, c)].sum()) if c else 0.0

    class Budget(Exception):
        pass

    def bk(R: list[int], P: set[int], X: set[int]) -> None:
        calls[0] += 1
        if calls[0] > budget:
            raise Budget
        if not P and not X:
            if len(R) > len(best[0]) or (len(R) == len(best[0]) and score(R) > best[1]):
                best[0], best[1] = sorted(R), score(R)
            return
        if len(R) + len(P) < len(best[0]):
            return
        u = max(P | X, key=lambda v: len(nbrs[v] & P))
        for v in sorted(P - nbrs[u]):
            bk(R + [v], P & nbrs[v], X & nbrs[v])
            P = P - {v}
            X = X | {v}

    try:
        bk([], set(range(n)), set())
        return best[0], "exact"
    except Budget:
        pass
    alive = set(range(n))
    while alive:
        deg = {v: len(nbrs[v] & alive) for v in alive}
        if all(d == len(alive) - 1 for d in deg.values()):
            break
        worst = min(alive, key=lambda v: (deg[v], Wt[v, list(alive)].sum(), -v))
        alive.discard(worst)
    return sorted(alive), "greedy"


# --------------------------------------------------------------------------- matrices


@dataclass
class PreferenceData:
    """Preference matrix built from battle counts.

    ``wins[i, j]`` counts i's wins over j under the tie policy (half a win per tie
    with ``half``); ``counts = wins + wins.T`` are the comparisons; ``preference`` is
    ``wins / counts`` with diagonal 1/2.
    """

    names: list[str]
    wins: np.ndarray
    counts: np.ndarray
    preference: np.ndarray
    tie_policy: str
    min_comparisons: int
    excluded: list[str]
    subset_method: str
    stats: dict

    def to_dict(self) -> dict:
        return {
            "models": list(self.names),
            "tie_policy": self.tie_policy,
            "min_comparisons": self.min_comparisons,
            "excluded_models": list(self.excluded),
            "subset_method": self.subset_method,
            "counts": self.counts.tolist(),
            "wins": self.wins.tolist(),
            "preference": self.preference.tolist(),
            "log": dict(self.stats),
        }


def build_preference(
    bc: BattleCounts,
    tie_policy: str = "drop",
    min_comparisons: int = 1,
    models: Sequence[str] | None = None,
    complete: bool = True,
) -> PreferenceData:
    """Preference matrix from counters.

    ``tie_policy``: ``drop`` (ties and both-bad votes are not comparisons) or
    ``half`` (each counts half a win for both sides). A pair is *compared* when it
    has at least ``min_comparisons`` comparisons under that policy. ``models``
    restricts to a given list (all must be present). With ``complete`` (default),
    models are reduced to the largest subset in which every pair is compared.
    Raises :class:`BattleLogError` when fewer than two models remain.
    """
    if tie_policy not in TIE_POLICIES:
        raise BattleLogError(f"tie policy must be one of {', '.join(TIE_POLICIES)}, got {tie_policy!r}")
    if int(min_comparisons) != min_comparisons or min_comparisons < 1:
        raise BattleLogError("min_comparisons must be a positive integer")
    min_comparisons = int(min_comparisons)
    if models is not None:
        unknown = [m for m in models if m not in bc.names]
        if unknown:
            raise BattleLogError(f"model(s) not in the log: {', '.join(unknown)}")
        bc = bc.subset(list(models))
    W = bc.wins.copy()
    if tie_policy == "half":
        W = W + 0.5 * (bc.ties + bc.bothbad)
    N = W + W.T
    names = list(bc.names)
    excluded: list[str] = []
    method = "all"
    adj = N >= min_comparisons
    np.fill_diagonal(adj, True)
    if complete and not adj.all():
        keep, method = largest_complete_subset(adj, N)
        excluded = [n for i, n in enumerate(names) if i not in set(keep)]
        ix = np.ix_(keep, keep)
        W, N, names = W[ix], N[ix], [names[i] for i in keep]
    if len(names) < 2:
        raise BattleLogError(
            f"fewer than two models with >= {min_comparisons} comparisons per pair (tie policy {tie_policy})"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        P = np.where(N > 0, W / np.where(N > 0, N, 1.0), np.nan)
    np.fill_diagonal(P, 0.5)
    np.fill_diagonal(N, 0.0)
    np.fill_diagonal(W, 0.0)
    return PreferenceData(names, W, N, P, tie_policy, min_comparisons, excluded, method, dict(bc.stats))


def load_preference(
    path: str,
    *,
    fmt: str | None = None,
    tie_policy: str = "drop",
    min_comparisons: int = 1,
    include: str | None = None,
    exclude: str | None = None,
    anony_only: bool = False,
) -> PreferenceData:
    """Read a battle log and build its (complete) preference matrix in one call.

    ``include`` / ``exclude`` are regular expressions on model names (``re.search``).
    """
    try:
        inc = re.compile(include) if include else None
        exc = re.compile(exclude) if exclude else None
    except re.error as e:
        raise BattleLogError(f"invalid model regex: {e}") from None

    def keep(m: str) -> bool:
        return (inc is None or inc.search(m) is not None) and (exc is None or exc.search(m) is None)

    flt = keep if (inc or exc) else None
    bc = count_battles(path, fmt, model_filter=flt, anony_only=anony_only)
    if bc.stats["used"] == 0:
        raise BattleLogError(f"{path}: no usable battles (rows read: {bc.stats['rows']})")
    return build_preference(bc, tie_policy, min_comparisons)
