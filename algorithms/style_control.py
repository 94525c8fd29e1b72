"""Style control: a Bradley-Terry ranking with the answers' style held fixed.

Judges, human and automatic, reward long and heavily formatted answers. LMArena's "style
control" (Chiang et al., LMSYS blog "Does style matter? Disentangling style and substance in
Chatbot Arena", 2024-08-29; FastChat ``serve/monitor/rating_systems.py``) and AlpacaEval 2's
length-controlled win rate (Dubois et al., "Length-controlled AlpacaEval", arXiv 2404.04475)
both fit a regression in which the outcome of a duel depends on the two models *and* on the
difference in style between the two answers, and rank the models by their own coefficients.

Model (a logistic regression, one row per counted duel)::

    logit P(a beats b) = theta_a - theta_b + sum_k gamma_k z_k(a, b)

with ``z_k = (f_k(a) - f_k(b)) / (f_k(a) + f_k(b) + 1)`` for the style features ``f``
(:data:`FEATURES`: words, Markdown headers, list items, bold spans, as LMArena counts them),
each standardised over the duels (mean 0, standard deviation 1). A tie counts as half a win
for each side. ``theta`` is identified by ``sum theta = 0``; a small ridge penalty
(``l2 * |theta, gamma|^2 / 2``) keeps the fit finite when a model never lost or never won.
Fitted by Newton's method (the log-likelihood is concave); standard errors from the inverse of
the penalised observed information (Wald). Ratings on LMArena's Elo scale
``1000 + (400 / ln 10) theta``.

What it assumes, and what it is not:

* the style effect is the same for every model and additive on the log-odds scale, and the
  four features capture the style a judge rewards; a model whose substance comes with length
  (a longer answer that is also better) loses some credit it deserved, which is why both
  rankings are shown side by side;
* it is descriptive: the intervals are Wald intervals at a fixed sample size, not valid at an
  adaptively chosen stopping time, and nothing here is certified. The certificate of a campaign
  is about the raw preferences it counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from .bradley_terry import ELO_SCALE

__all__ = ["FEATURES", "StyleFit", "style_counts", "fit_style_controlled"]

FEATURES = ("words", "headers", "list_items", "bold")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
MAX_NEWTON = 50


def style_counts(text: str | None) -> np.ndarray:
    """The style features of one answer: words, Markdown headers, list items, bold spans."""
    t = text or ""
    return np.array(
        [len(t.split()), len(_HEADER.findall(t)), len(_LIST.findall(t)), len(_BOLD.findall(t))], dtype=float
    )


@dataclass
class StyleFit:
    """Result of :func:`fit_style_controlled`: per-model ``theta`` (sum zero), standard errors,
    Elo-scale ratings and 95% Wald bounds; the standardised style coefficients ``gamma`` (log-odds
    per standard deviation of each feature's difference) with their standard errors."""

    theta: np.ndarray
    se: np.ndarray
    ratings: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    gamma: dict[str, float]
    gamma_se: dict[str, float]
    n: int


def _xt(i: np.ndarray, j: np.ndarray, z: np.ndarray, r: np.ndarray, n_models: int) -> np.ndarray:
    """``X^T r`` for the design ``X = [e_i - e_j | z]`` (one row per duel), without forming ``X``."""
    models = np.bincount(i, weights=r, minlength=n_models) - np.bincount(j, weights=r, minlength=n_models)
    return np.concatenate([models, z.T @ r])


def _xt_w_x(i: np.ndarray, j: np.ndarray, z: np.ndarray, w: np.ndarray, n_models: int) -> np.ndarray:
    """``X^T diag(w) X`` for the same design, in time linear in the duels: the models' block is the
    weighted Laplacian of the pairs played, the cross block the features' weighted sums per model."""
    L, q = n_models, z.shape[1]
    H = np.zeros((L + q, L + q))
    pair = np.bincount(i * L + j, weights=w, minlength=L * L).reshape(L, L)
    pair = pair + pair.T
    H[:L, :L] = np.diag(pair.sum(axis=1)) - pair
    wz = z * w[:, None]
    cross = np.zeros((L, q))
    np.add.at(cross, i, wz)
    np.subtract.at(cross, j, wz)
    H[:L, L:] = cross
    H[L:, :L] = cross.T
    H[L:, L:] = z.T @ wz
    return H


def fit_style_controlled(
    i: npt.ArrayLike,
    j: npt.ArrayLike,
    score: npt.ArrayLike,
    n_models: int,
    style_i: np.ndarray | None = None,
    style_j: np.ndarray | None = None,
    l2: float = 1e-4,
) -> StyleFit:
    """Fit the model above; without ``style_i``/``style_j`` it is the plain Bradley-Terry fit.

    ``i``, ``j``: the models of each duel; ``score``: the score of ``i`` (1 win, 0.5 tie, 0 loss);
    ``style_i``, ``style_j``: arrays of shape (duels, len(FEATURES)) of :func:`style_counts`.
    Raises ValueError for inputs of different lengths, scores outside [0, 1] or unknown models.
    """
    ii, jj, y = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64), np.asarray(score, dtype=float)
    if not (len(ii) == len(jj) == len(y)):
        raise ValueError("i, j and score must have the same length")
    if len(ii) and (ii.min() < 0 or jj.min() < 0 or max(ii.max(), jj.max()) >= n_models or np.any(ii == jj)):
        raise ValueError(f"model indices must be distinct and in [0, {n_models})")
    if np.any(~np.isfinite(y)) or np.any((y < 0) | (y > 1)):
        raise ValueError("scores must be in [0, 1]")
    z = None
    names: tuple[str, ...] = ()
    if style_i is not None and style_j is not None:
        a, b = np.asarray(style_i, dtype=float), np.asarray(style_j, dtype=float)
        if a.shape != (len(ii), len(FEATURES)) or b.shape != a.shape:
            raise ValueError(f"style arrays must have shape (duels, {len(FEATURES)})")
        z = (a - b) / (a + b + 1.0)
        sd = z.std(axis=0)
        keep = sd > 0  # a feature that never differs says nothing
        z = (z[:, keep] - z[:, keep].mean(axis=0)) / sd[keep]
        names = tuple(f for f, k in zip(FEATURES, keep) if k)
    q = 0 if z is None else z.shape[1]
    zz = np.zeros((len(ii), 0)) if z is None else z
    p = n_models + q
    # sum theta = 0 through a penalty on the mean (the likelihood does not see a common shift)
    C = np.zeros((p, p))
    C[:n_models, :n_models] = 1.0 / n_models
    beta = np.zeros(p)
    H = np.eye(p)
    for _ in range(MAX_NEWTON):
        mu = expit(beta[ii] - beta[jj] + zz @ beta[n_models:])
        grad = _xt(ii, jj, zz, y - mu, n_models) - l2 * beta - C @ beta
        H = _xt_w_x(ii, jj, zz, mu * (1 - mu), n_models) + l2 * np.eye(p) + C
        step = np.linalg.solve(H, grad)
        beta += step
        if np.max(np.abs(step)) < 1e-9:
            break
    cov = np.linalg.inv(H)
    se_all = np.sqrt(np.clip(np.diag(cov), 0, None))
    theta, se = beta[:n_models] - beta[:n_models].mean(), se_all[:n_models]
    ratings = 1000.0 + ELO_SCALE * theta
    return StyleFit(
        theta=theta,
        se=se,
        ratings=ratings,
        lower=ratings - 1.959963984540054 * ELO_SCALE * se,
        upper=ratings + 1.959963984540054 * ELO_SCALE * se,
        gamma={f: float(g) for f, g in zip(names, beta[n_models:])},
        gamma_se={f: float(s) for f, s in zip(names, se_all[n_models:])},
        n=int(len(ii)),
    )
