"""One sweep of the bench's sweep-overhead row in a fresh interpreter (``sweep_overhead.
sweep_child``): ``python -m fedsweep.bench.sweep_main '{"spec": null, "profile": "smoke"}'``
imports what ``python -m fedsweep.bench`` has imported when it measures its sweep (torch and
the engine, through its command module; nothing of Ray, Tune or MLflow), so that this sweep's
driver starts from the same point, then measures the sweep (``measure_sweep``) and prints it as
JSON on its last line.
"""

from __future__ import annotations

import json
import sys

import fedsweep.bench.command  # noqa: F401 - the bench process's imports, see above
from fedsweep.bench.sweep_overhead import measure_sweep


def main(argv: list[str]) -> None:
    args = json.loads(argv[0])
    print(json.dumps(measure_sweep(args.get("spec"), args.get("profile", "smoke"))))


if __name__ == "__main__":
    main(sys.argv[1:])
