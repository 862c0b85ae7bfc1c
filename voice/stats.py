"""Percentiles and word error rate, written out so the numbers are easy to audit.

At the bottom of the package (it imports nothing of voice): the conversation's turn
metrics and the server's ``/metrics`` report percentiles as the benchmarks do, and
they must not reach up into :mod:`voice.bench` for them.
"""

from __future__ import annotations

import math
import re


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no data."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    value = ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
    return round(value, 1)


def p50_p95(values: list[float]) -> dict[str, float | int | None]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "n": len(values)}


_SMALL = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
]  # fmt: skip


def normalize_text(text: str) -> str:
    """Lower case, hyphens as spaces, punctuation dropped (apostrophes kept), and the
    numbers 0-20 spelled out, so "1, 2, 3" and "one two three" compare equal."""
    text = text.lower().replace("-", " ")
    text = re.sub(r"[^\w' ]+", " ", text)
    words = [w.strip("'") for w in text.split() if w.strip("'")]
    return " ".join(_SMALL[int(w)] if w.isdigit() and int(w) <= 20 else w for w in words)


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(edit distance in words, reference length) after normalisation."""
    ref, hyp = normalize_text(reference).split(), normalize_text(hypothesis).split()
    previous = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        current = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
        previous = current
    return previous[-1], len(ref)


def wer(pairs: list[tuple[str, str]]) -> float:
    """Corpus WER in percent: total edits over total reference words."""
    errors = total = 0
    for reference, hypothesis in pairs:
        e, n = word_errors(reference, hypothesis)
        errors, total = errors + e, total + n
    return round(100.0 * errors / max(1, total), 2)
