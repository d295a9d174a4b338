#!/usr/bin/env python3
"""Totals of a CSV file's sales by region, the largest first."""
import sys


def load(path):
    with open(path) as f:
        lines = f.read().splitlines()
    rows = []
    for line in lines[2:]:
        region, item, amount = line.split(",")
        rows.append((region, int(float(amount))))
    return rows


def totals(rows):
    out = {}
    for region, amount in rows:
        out[region] = out.get(region, 0) + amount
    return sorted(out.items(), key=lambda kv: kv[1])


def main(argv):
    path = argv[1] if len(argv) > 1 else "/app/sales.csv"
    for region, total in totals(load(path)):
        print(f"{region} {total:.2f}")


if __name__ == "__main__":
    main(sys.argv)
