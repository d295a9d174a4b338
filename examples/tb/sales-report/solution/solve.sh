#!/bin/bash
# Read the file as CSV (quoted fields, the header skipped once), keep the
# cents, and sort by total, largest first, then by region.
cat > /app/report.py <<'PY'
#!/usr/bin/env python3
"""Totals of a CSV file's sales by region, the largest first."""
import csv
import sys
from decimal import Decimal


def load(path):
    with open(path, newline="") as f:
        return [(row["region"], Decimal(row["amount"])) for row in csv.DictReader(f)]


def totals(rows):
    out = {}
    for region, amount in rows:
        out[region] = out.get(region, Decimal(0)) + amount
    return sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))


def main(argv):
    path = argv[1] if len(argv) > 1 else "/app/sales.csv"
    for region, total in totals(load(path)):
        print(f"{region} {total:.2f}")


if __name__ == "__main__":
    main(sys.argv)
PY
