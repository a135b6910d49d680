"""A bench row measured in a fresh interpreter (its own peak memory, its own imports)."""

from __future__ import annotations

import json


def child_json(args: list[str], what: str) -> dict:
    """``python -m ARGS`` in a fresh interpreter; the JSON object on its last line of output,
    else a RuntimeError naming ``what``, its exit code and the end of its output."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        tail = (out.stderr or out.stdout).strip()[-2000:]
        raise RuntimeError(f"{what} failed (exit {out.returncode}): {tail}")
    return json.loads(lines[-1])
