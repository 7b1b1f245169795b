"""Power of the claims ledger's paired test: what difference a number of questions can detect, and
how many questions a difference needs.

The ledger compares two retrievers on the same questions with the sign test on the questions
only one of them answers (McNemar's test). Its power depends on the difference ``delta``
between the two top-k rates and on the share ``psi`` of discordant questions (those only one
side answers), which is at least ``|delta|``. With Connor's normal approximation (Connor 1987,
"Sample size for testing differences in proportions for the paired-sample design",
Biometrics 43(1)), a two-sided test at level ``alpha`` with power ``1 - beta`` needs

    n = (z[1 - alpha/2] * sqrt(psi) + z[1 - beta] * sqrt(psi - delta**2))**2 / delta**2

questions. :func:`questions_needed` is that n; :func:`detectable_difference` solves it for delta
at a given n. Rates and differences are proportions here (the ledger shows points).
"""

from __future__ import annotations

import math

POWER = 0.8  # 1 - beta, the usual planning value


def _z(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def _root_term(delta: float, psi: float, alpha: float, power: float) -> float:
    """``z[1 - alpha/2] sqrt(psi') + z[power] sqrt(psi' - delta^2)``, the square root of Connor's
    numerator, with ``psi' = max(psi, delta)`` (a difference needs that many discordant questions):
    ``n`` questions detect ``delta`` when ``sqrt(n) * delta`` reaches it."""
    share = min(1.0, max(psi, delta))
    return _z(1 - alpha / 2) * math.sqrt(share) + _z(power) * math.sqrt(max(share - delta * delta, 0.0))


def questions_needed(delta: float, psi: float, alpha: float = 0.05, power: float = POWER) -> int:
    """Questions a paired sign test needs to detect a difference ``delta`` (a proportion, sign
    ignored) at two-sided level ``alpha`` with ``power``, when a share ``psi`` of the questions
    is discordant (raised to ``|delta|`` if below it: a difference needs that many)."""
    delta = abs(float(delta))
    if not 0 < delta <= 1:
        raise ValueError(f"a difference in (0, 1] is needed, got {delta}")
    n = (_root_term(delta, float(psi), alpha, power) / delta) ** 2
    return int(math.ceil(n - 1e-9))


def detectable_difference(n: int, psi: float, alpha: float = 0.05, power: float = POWER) -> float | None:
    """The smallest difference (a proportion) that ``n`` questions detect at two-sided level
    ``alpha`` with ``power``, when a share ``psi`` of them is discordant (raised to the
    difference where it is below it, as in :func:`questions_needed`); None when not even a
    difference of 1 can be (too few questions). ``psi`` of 0 (no question differs) is taken as
    one question in ``n``."""
    from scipy.optimize import brentq

    if n < 1:
        raise ValueError(f"questions must be at least 1, got {n}")
    psi = max(float(psi), 1.0 / n)

    def gap(delta: float) -> float:  # > 0 where n questions are more than delta needs
        return math.sqrt(n) * delta - _root_term(delta, psi, alpha, power)

    if gap(1.0) < 0:
        return None
    return float(brentq(gap, 0.0, 1.0, xtol=1e-10))
