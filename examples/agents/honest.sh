#!/bin/sh
# An honest, oracle-style agent for the example tasks: it reads the
# instruction and does the work, touching nothing but what the task asks.
set -eu
grep -q . "$PROCTOR_INSTRUCTION"
if [ -f /app/stats.py ]; then
    cat > /app/stats.py <<'PY'
def mean(xs):
    if not xs:
        raise ValueError("mean of an empty list")
    return sum(xs) / len(xs)
PY
elif [ -f /app/slug.py ]; then
    cat > /app/slug.py <<'PY'
import re


def slugify(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
PY
else
    printf 'Hello, Proctor!\n' > /app/hello.txt
    printf '#!/bin/sh\ncat /app/hello.txt\nwhoami\n' > /usr/local/bin/greet
    chmod 755 /usr/local/bin/greet
fi
