#!/bin/bash
set -e
cat > /app/slug.py <<'PY'
"""URL slugs."""

import re


def slugify(text):
    """Return a URL slug for text."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
PY
