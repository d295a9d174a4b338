#!/bin/sh
# Builds environment/workspace: a git repository whose tag v1.0 is the
# commit the agent starts from and whose later commit (tag v1.1, branch
# main) holds the fix, with a stash, a side branch and a remote, so that the
# sanitizing of the workspace has something to remove. Deterministic: fixed
# names and dates.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ws=$here/workspace
rm -rf "$ws"
mkdir -p "$ws"
cd "$ws"
export GIT_AUTHOR_NAME=Example GIT_AUTHOR_EMAIL=example@invalid \
       GIT_COMMITTER_NAME=Example GIT_COMMITTER_EMAIL=example@invalid \
       GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
g() { git -c init.defaultBranch=main -c core.hooksPath=/dev/null "$@"; }
at() { GIT_AUTHOR_DATE="$1 +0000" GIT_COMMITTER_DATE="$1 +0000"; export GIT_AUTHOR_DATE GIT_COMMITTER_DATE; }
g init -q .
cat > slug.py <<'PY'
"""URL slugs."""


def slugify(text):
    """Return a URL slug for text."""
    return text.lower().replace(" ", "-")
PY
printf 'Slugs for titles.\n' > README.md
at "2024-01-01T00:00:00"; g add -A; g commit -qm "slugify: first version"
mkdir -p tests
cat > tests/test_basic.py <<'PY'
import unittest

from slug import slugify


class Basic(unittest.TestCase):
    def test_lower(self):
        self.assertEqual(slugify("abc"), "abc")
PY
at "2024-01-02T00:00:00"; g add -A; g commit -qm "tests: basic"; g tag v1.0
cat > slug.py <<'PY'
"""URL slugs."""

import re


def slugify(text):
    """Return a URL slug for text."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")  # THE-FIX
PY
at "2024-01-03T00:00:00"; g add -A; g commit -qm "slugify: collapse punctuation (the fix)"; g tag v1.1
g branch side v1.1
printf 'work in progress THE-FIX\n' >> README.md
at "2024-01-04T00:00:00"; g stash -q
g remote add origin https://example.invalid/slug.git
g checkout -q v1.0 2>/dev/null; g checkout -q main
