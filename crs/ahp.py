"""AHP: criterion weights from pairwise preferences, as the VM-centric balancer derives them.

Derumier's series (reference/vm-balancer.md §2) states its preferences as a one-sided
table, "criterion i is v times as important as j" on Saaty's 1–9 scale, and lets AHP turn
them into TOPSIS weights. Only the reciprocal fill (a_ji = 1/a_ij) reproduces the series'
printed example, so that is the matrix; the weights are Saaty's principal eigenvector, and
the consistency ratio is reported so an admin who edits the table sees when it contradicts
itself (CR ≥ 0.10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import CrsError

# Saaty's random consistency index by matrix size (reference/vm-balancer.md §2).
RANDOM_INDEX = {1: 0.0, 2: 0.0, 3: 0.58, 4: 0.90, 5: 1.12, 6: 1.24, 7: 1.32, 8: 1.41, 9: 1.45, 10: 1.49}


@dataclass(frozen=True, slots=True)
class Weights:
    criteria: tuple[str, ...]
    weights: tuple[float, ...]  # sum 1, in `criteria` order
    lambda_max: float
    consistency_ratio: float

    @property
    def consistent(self) -> bool:
        return self.consistency_ratio < 0.10

    def of(self, criterion: str) -> float:
        return self.weights[self.criteria.index(criterion)]


def matrix(criteria: tuple[str, ...], preferences: Mapping[tuple[str, str], float]) -> np.ndarray:
    """The reciprocal matrix of `preferences` {(i, j): v}; every pair must be stated once."""
    index = {c: k for k, c in enumerate(criteria)}
    a = np.eye(len(criteria))
    for (i, j), v in preferences.items():
        if i not in index or j not in index or i == j:
            raise CrsError(f"ahp preference ({i}, {j}): both must be distinct criteria of {list(criteria)}")
        if not (1 / 9 <= v <= 9):
            raise CrsError(f"ahp preference ({i}, {j}) = {v!r}: must be within Saaty's 1/9 … 9")
        a[index[i], index[j]], a[index[j], index[i]] = v, 1.0 / v
    n = len(criteria)
    stated = {frozenset(pair) for pair in preferences}
    if len(stated) != len(preferences) or len(stated) != n * (n - 1) // 2:
        raise CrsError(f"ahp preferences: every pair of {list(criteria)} must be stated exactly once")
    return a


def weights(criteria: tuple[str, ...], preferences: Mapping[tuple[str, str], float]) -> Weights:
    """Principal-eigenvector weights of the preference table, with Saaty's consistency ratio."""
    a = matrix(criteria, preferences)
    values, vectors = np.linalg.eig(a)
    k = int(np.argmax(values.real))
    vector = np.abs(vectors[:, k].real)
    w = vector / vector.sum()
    n = len(criteria)
    lam = float(values[k].real)
    ci = (lam - n) / (n - 1) if n > 1 else 0.0
    ri = RANDOM_INDEX.get(n, 1.49)
    return Weights(criteria, tuple(float(x) for x in w), lam, ci / ri if ri else 0.0)
