#!/bin/bash
# Harbor-style verifier: run the hidden tests (which never import the
# submission into their own process) and write the reward.
if python3 -I /tests/test_stats.py -v; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
