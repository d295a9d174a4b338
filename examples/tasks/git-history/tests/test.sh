#!/bin/bash
cd /app || exit 1
if PYTHONPATH=/app python3 /tests/test_slug.py -v; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
