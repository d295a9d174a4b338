#!/bin/sh
cat /app/data/*.log | wc -l > /app/answer.txt
