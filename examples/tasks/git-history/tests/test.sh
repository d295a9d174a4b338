#!/bin/bash
if python3 -I /tests/test_slug.py -v; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
