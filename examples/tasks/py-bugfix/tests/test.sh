#!/bin/bash
# Harbor-style verifier: run the hidden tests against /app, write the reward.
cd /app || exit 1
if PYTHONPATH=/app python3 /tests/test_stats.py -v; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
