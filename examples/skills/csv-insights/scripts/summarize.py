#!/usr/bin/env python3
"""Summarise a delimited data file as JSON (standard library only).

Usage: summarize.py FILE [--top N] [--columns a,b] [--sample ROWS]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from collections import Counter
from pathlib import Path


def read_rows(path: Path, sample: int | None) -> tuple[list[str], list[list[str]], str]:
    raw = path.read_bytes()
    try:
        text, encoding = raw.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = raw.decode("latin-1"), "latin-1"
    if not text.strip():
        return [], [], encoding
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
            text[:65536], delimiters=",;\t|"
        )
    except csv.Error:  # a single column has no delimiter to find
        dialect = csv.excel
    reader = csv.reader(text.splitlines(), dialect)
    header = next(reader, [])
    rows = []
    for index, row in enumerate(reader):
        if sample is not None and index >= sample:
            break
        rows.append(row)
    return header, rows, encoding


def as_number(value: str) -> float | None:
    try:
        return float(value.replace("_", ""))
    except ValueError:
        return None


def summarize_column(values: list[str], top: int) -> dict[str, object]:
    present = [v for v in values if v.strip() != ""]
    numbers = [n for n in (as_number(v) for v in present) if n is not None]
    summary: dict[str, object] = {
        "missing": len(values) - len(present),
        "distinct": len(set(present)),
    }
    if present and len(numbers) == len(present):
        summary.update(
            type="number",
            min=min(numbers),
            max=max(numbers),
            mean=round(statistics.fmean(numbers), 4),
            median=statistics.median(numbers),
        )
    else:
        summary.update(type="text", top=Counter(present).most_common(top))
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file", type=Path)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--columns", default="")
    parser.add_argument("--sample", type=int, default=None)
    args = parser.parse_args(argv)
    header, rows, encoding = read_rows(args.file, args.sample)
    wanted = [c for c in args.columns.split(",") if c] or header
    columns: dict[str, object] = {}
    for name in wanted:
        if name not in header:
            print(f"unknown column {name!r}; columns are: {', '.join(header)}", file=sys.stderr)
            return 2
        index = header.index(name)
        values = [row[index] if index < len(row) else "" for row in rows]
        columns[name] = summarize_column(values, args.top)
    report = {"rows": len(rows), "encoding": encoding, "columns": columns}
    json.dump(report, sys.stdout, indent=2, default=str)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
