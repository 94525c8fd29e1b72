"""Dueling bandit instances with heterogeneous costs: ``nu = (C, P)`` (paper, Section 2).

An :class:`Instance` holds ``L >= 2`` arm names, a cost vector ``c`` (``c_i > 0``)
and a preference matrix ``P`` with ``P[i, j] = p_ij = P(i beats j)`` and
``p_ji = 1 - p_ij``. The diagonal is inconsequential and is stored as 0.5.

All inputs are validated at construction; errors are :class:`InstanceError`
(a ``ValueError``) with a message that names the problem.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["Instance", "InstanceError", "synthetic_instance", "SYNTHETIC_PREFERENCE", "parse_builtin"]

#: The paper's synthetic 3-arm preference matrix (Section 5.1, equation ``dataset: preference matrix``).
SYNTHETIC_PREFERENCE = np.array([[0.5, 0.63, 0.65], [0.37, 0.5, 0.6], [0.35, 0.4, 0.5]], dtype=float)

#: Tolerance for ``p_ij + p_ji = 1``.
ANTISYMMETRY_TOL = 1e-6


class InstanceError(ValueError):
    """An instance (names, costs, preference matrix) is malformed."""


@dataclass(frozen=True)
class Instance:
    """A cost-aware dueling bandit instance.

    Parameters
    ----------
    names : sequence of str
        Unique, non-empty arm names.
    costs : array-like of shape (L,)
        Per-query cost ``c_i`` of each arm; finite and > 0. Sampling pair
        ``(i, j)`` costs ``c_i + c_j``.
    preference : array-like of shape (L, L)
        ``P[i, j] = p_ij``, entries in [0, 1], ``p_ij + p_ji = 1``.
    metadata : dict, optional
        Free-form extra keys (for example ``provenance``), kept on round trips.
    ties : array-like of shape (L, L), optional
        ``ties[i][j]`` = probability that a duel of ``i`` and ``j`` is a tie (score 1/2 each);
        symmetric, ``0 <= ties[i][j] <= 2 min(p_ij, 1 - p_ij)``. ``preference`` stays the mean
        score: ``p_ij = P(i wins) + ties[i][j] / 2``. None (the default): no ties.
    require_condorcet : bool, default True
        Raise if no Condorcet winner exists, naming each arm's defeat.
    """

    names: tuple[str, ...]
    costs: np.ndarray
    preference: np.ndarray
    metadata: dict = field(default_factory=dict)
    ties: np.ndarray | None = None

    def __init__(
        self,
        names: Sequence[str],
        costs: Any,
        preference: Any,
        metadata: Mapping[str, Any] | None = None,
        *,
        require_condorcet: bool = True,
        ties: Any = None,
    ) -> None:
        names_t, c, P = validate_components(names, costs, preference)
        object.__setattr__(self, "names", names_t)
        object.__setattr__(self, "costs", c)
        object.__setattr__(self, "preference", P)
        object.__setattr__(self, "metadata", dict(metadata or {}))
        object.__setattr__(self, "ties", None if ties is None else validate_ties(names_t, P, ties))
        if require_condorcet and self.condorcet_winner is None:
            raise InstanceError("no Condorcet winner: " + describe_condorcet_failures(self.names, P))

    # -- properties -------------------------------------------------------------
    @property
    def L(self) -> int:
        """Number of arms."""
        return len(self.names)

    @property
    def n_pairs(self) -> int:
        """Number of unordered pairs ``K = L (L-1) / 2``."""
        return self.L * (self.L - 1) // 2

    @property
    def condorcet_winner(self) -> int | None:
        """Index of the arm that beats every other with probability > 1/2, or None."""
        return condorcet_winner(self.preference)

    def pairs(self) -> list[tuple[int, int]]:
        """All pairs ``(i, j)``, ``i < j``, in the library's canonical order."""
        return [(i, j) for i in range(self.L) for j in range(i + 1, self.L)]

    # -- (de)serialisation --------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, require_condorcet: bool = True) -> "Instance":
        """Build from ``{"names": [...], "costs": [...], "preference": [[...]]}``; extra keys are metadata."""
        if not isinstance(data, Mapping):
            raise InstanceError("an instance must be a JSON object with keys names, costs, preference")
        missing = [k for k in ("names", "costs", "preference") if k not in data]
        if missing:
            raise InstanceError(f"instance is missing key(s): {', '.join(missing)}")
        extra = {k: v for k, v in data.items() if k not in ("names", "costs", "preference", "ties")}
        return cls(
            data["names"],
            data["costs"],
            data["preference"],
            extra,
            require_condorcet=require_condorcet,
            ties=data.get("ties"),
        )

    def to_dict(self) -> dict[str, Any]:
        out = {
            "names": list(self.names),
            "costs": [float(x) for x in self.costs],
            "preference": [[float(x) for x in row] for row in self.preference],
        }
        if self.ties is not None:
            out["ties"] = [[float(x) for x in row] for row in self.ties]
        out.update(self.metadata)
        return out

    @classmethod
    def from_json_file(cls, path: str | Path, *, require_condorcet: bool = True) -> "Instance":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InstanceError(f"instance file not found: {path}") from None
        except OSError as exc:
            raise InstanceError(f"cannot read instance file {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise InstanceError(f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InstanceError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise InstanceError(f"{path} is nested too deeply to be an instance file") from None
        return cls.from_dict(data, require_condorcet=require_condorcet)

    def with_costs(self, costs: Any) -> "Instance":
        return Instance(self.names, costs, self.preference, self.metadata, ties=self.ties)

    def tie_matrix(self) -> np.ndarray:
        """``ties`` as an ``(L, L)`` array, zeros when the instance has none."""
        return np.zeros((self.L, self.L)) if self.ties is None else self.ties


#: The largest accepted per-query cost (any unit). Far above any real price, and small
#: enough that pair sums, c* and the lower bound stay finite for every L the tools accept.
COST_MAX = 1e12


def cost_ok(c: float) -> bool:
    """A per-query cost is finite, > 0 and at most :data:`COST_MAX` (the one rule)."""
    return math.isfinite(c) and 0 < c <= COST_MAX


def validate_components(names: Any, costs: Any, preference: Any) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """Validate names, costs and preference matrix; return them normalised."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise InstanceError("names must be a list of strings")
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise InstanceError("names must be non-empty strings")
    names_t = tuple(names)
    L = len(names_t)
    if L < 2:
        raise InstanceError(f"an instance needs at least 2 arms, got {L}")
    dup = sorted({n for n in names_t if names_t.count(n) > 1})
    if dup:
        raise InstanceError(f"names must be unique; repeated: {', '.join(dup)}")
    try:
        c = np.array(costs, dtype=float)
    except (TypeError, ValueError):
        raise InstanceError("costs must be a list of numbers") from None
    if c.shape != (L,):
        raise InstanceError(f"costs must have one entry per arm ({L}), got shape {c.shape}")
    bad = [names_t[i] for i in range(L) if not cost_ok(float(c[i]))]
    if bad:
        raise InstanceError(f"costs must be finite and > 0, at most {COST_MAX:g}; bad cost for: {', '.join(bad)}")
    try:
        P = np.array(preference, dtype=float)
    except (TypeError, ValueError):
        raise InstanceError("preference must be a square matrix (list of lists) of numbers") from None
    if P.shape != (L, L):
        raise InstanceError(f"preference must be a {L}x{L} matrix (one row and column per arm), got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise InstanceError("preference entries must be finite numbers")
    off = ~np.eye(L, dtype=bool)
    if np.any((P[off] < 0) | (P[off] > 1)):
        i, j = np.argwhere(off & ((P < 0) | (P > 1)))[0]
        raise InstanceError(f"preference entries must be in [0, 1]; p[{names_t[i]}][{names_t[j]}] = {P[i, j]}")
    S = P + P.T
    bad_pairs = np.argwhere(off & (np.abs(S - 1.0) > ANTISYMMETRY_TOL))
    if len(bad_pairs):
        i, j = bad_pairs[0]
        raise InstanceError(
            f"preference must satisfy p_ij + p_ji = 1; p[{names_t[i]}][{names_t[j]}] + "
            f"p[{names_t[j]}][{names_t[i]}] = {S[i, j]:.6g}"
        )
    P = P.copy()
    np.fill_diagonal(P, 0.5)
    return names_t, c, P


def validate_ties(names: Sequence[str], P: np.ndarray, ties: Any) -> np.ndarray:
    """Validate a tie matrix against the preference matrix; return it with a zero diagonal."""
    L = len(names)
    try:
        T = np.array(ties, dtype=float)
    except (TypeError, ValueError):
        raise InstanceError("ties must be a square matrix (list of lists) of numbers") from None
    if T.shape != (L, L):
        raise InstanceError(f"ties must be a {L}x{L} matrix (one row and column per arm), got shape {T.shape}")
    if not np.all(np.isfinite(T)):
        raise InstanceError("ties entries must be finite numbers")
    off = ~np.eye(L, dtype=bool)
    cap = 2.0 * np.minimum(P, 1.0 - P)
    bad = np.argwhere(off & ((T < 0) | (T > cap + ANTISYMMETRY_TOL)))
    if len(bad):
        i, j = bad[0]
        raise InstanceError(
            f"ties must satisfy 0 <= ties[i][j] <= 2 min(p_ij, 1 - p_ij); ties[{names[i]}][{names[j]}] = "
            f"{T[i, j]:.6g} with p = {P[i, j]:.6g}"
        )
    asym = np.argwhere(off & (np.abs(T - T.T) > ANTISYMMETRY_TOL))
    if len(asym):
        i, j = asym[0]
        raise InstanceError(
            f"ties must be symmetric; ties[{names[i]}][{names[j]}] = {T[i, j]:.6g} but "
            f"ties[{names[j]}][{names[i]}] = {T[j, i]:.6g}"
        )
    T = np.clip((T + T.T) / 2.0, 0.0, cap)
    np.fill_diagonal(T, 0.0)
    return T


def condorcet_winner(P: np.ndarray) -> int | None:
    """Index ``i`` with ``P[i, j] > 1/2`` for every ``j != i``, or None."""
    L = P.shape[0]
    for i in range(L):
        if all(P[i, j] > 0.5 for j in range(L) if j != i):
            return i
    return None


def describe_condorcet_failures(names: Sequence[str], P: np.ndarray) -> str:
    """One clause per arm saying whom it does not beat, e.g. ``a loses to b (p=0.40)``."""
    parts = []
    L = len(names)
    for i in range(L):
        losses = [f"{names[j]} (p={P[i, j]:.3g})" for j in range(L) if j != i and not P[i, j] > 0.5]
        parts.append(f"{names[i]} does not beat {', '.join(losses)}")
    return "; ".join(parts)


def synthetic_instance(k: float = 1.0) -> Instance:
    """The paper's synthetic instance: ``SYNTHETIC_PREFERENCE`` with costs ``(k, 1, 1)``."""
    return Instance(
        ["arm1", "arm2", "arm3"],
        [k, 1.0, 1.0],
        SYNTHETIC_PREFERENCE,
        {"provenance": {"source": "paper Section 5.1", "derivation": f"costs (k, 1, 1) with k={k:g}"}},
    )


_SYNTH_RE = re.compile(r"^synthetic(?::k=([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?))?$")


def parse_builtin(spec: str) -> Instance | None:
    """Resolve the algorithm-level built-in names (``synthetic`` or ``synthetic:k=K``); None if not one."""
    m = _SYNTH_RE.match(spec.strip())
    if not m:
        if spec.strip().startswith("synthetic"):
            raise InstanceError(f"bad built-in instance {spec!r}: use synthetic:k=K with K > 0, e.g. synthetic:k=4")
        return None
    k = float(m.group(1)) if m.group(1) else 1.0
    if not (k > 0 and math.isfinite(k)):
        raise InstanceError(f"synthetic:k=K needs K > 0, got {k}")
    return synthetic_instance(k)
