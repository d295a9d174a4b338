#!/bin/sh
# The answer is computed from pristine copies kept here, not from what the
# agent may have changed in /app/data.
want=5
if [ "$(tr -d ' \n' < /app/answer.txt 2>/dev/null)" = "$want" ]; then
	echo 1 > /logs/verifier/reward.txt
else
	echo 0 > /logs/verifier/reward.txt
fi
