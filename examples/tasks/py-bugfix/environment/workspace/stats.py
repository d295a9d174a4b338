"""Small statistics helpers."""


def mean(xs):
    """Return the arithmetic mean of xs; ValueError when xs is empty."""
    total = 0
    for x in xs:
        total += x
    return total // len(xs)
