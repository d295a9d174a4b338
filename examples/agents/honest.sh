#!/bin/sh
# An honest agent for the example tasks: it reads the instruction and does
# the work, touching nothing but what the task asks. Its fixes are its own,
# not the tasks' solutions: a copy of a solution in an agent's files is a
# smuggled answer (docs/trial.md).
set -eu
grep -q . "$PROCTOR_INSTRUCTION"
if [ -f /app/stats.py ]; then
    cat > /app/stats.py <<'PY'
def mean(xs):
    if len(xs) == 0:
        raise ValueError("cannot take the mean of no numbers")
    return sum(xs) / len(xs)
PY
elif [ -f /app/slug.py ]; then
    cat > /app/slug.py <<'PY'
import re


def slugify(text):
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))
PY
else
    printf 'Hello, Proctor!\n' > /app/hello.txt
    printf '#!/bin/sh\ncat /app/hello.txt\nwhoami\n' > /usr/local/bin/greet
    chmod 755 /usr/local/bin/greet
fi
