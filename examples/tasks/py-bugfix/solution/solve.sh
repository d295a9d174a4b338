#!/bin/bash
set -e
cat > /app/stats.py <<'PY'
"""Small statistics helpers."""


def mean(xs):
    """Return the arithmetic mean of xs; ValueError when xs is empty."""
    if not xs:
        raise ValueError("mean of an empty list")
    return sum(xs) / len(xs)
PY
