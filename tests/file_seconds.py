"""Each test file's seconds from a pytest log written with ``--durations=0`` (setup, call and
teardown of every test, summed per file), as ``tests/file_seconds.json``: the order in which
``make test`` starts the files (tests/conftest.py). Refresh it after a suite run:

    python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=0 tests > LOG
    python tests/file_seconds.py LOG
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

ROW = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(tests/[^:\s]+\.py)::")


def file_seconds(log: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in log.splitlines():
        found = ROW.match(line)
        if found:
            totals[found[2]] = totals.get(found[2], 0.0) + float(found[1])
    return {path: round(seconds, 1) for path, seconds in sorted(totals.items())}


def main(argv: list[str]) -> int:
    totals = file_seconds(Path(argv[0]).read_text())
    if not totals:
        print(f"{argv[0]}: no --durations=0 rows", file=sys.stderr)
        return 2
    out = Path(__file__).with_name("file_seconds.json")
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(totals, indent=1) + "\n")
    os.replace(tmp, out)
    print(f"{out}: {len(totals)} files, {sum(totals.values()):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
