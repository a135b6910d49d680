"""``python -m fedsweep.warmup`` (run by ``make install``): build once, at install time, what
every process would otherwise build the first time it needs it.

* The compiled kernels (numba, ``cache=True``): the fused SVM trajectory
  (``engine/fast/svm_trajectory.py``, with every buffer it can fill), the compiled herding
  (``engine/fast/herding.py``), GraB's compiled sign balancing (``engine/fast/balancing.py``)
  and FedVeca's per-step sums (``engine/fast/estimates.py``), in float32 and float64. numba
  writes them to its disk cache beside the sources; a process then loads them instead of
  compiling (measured on the 2-core CI machine: about 10 s of compilation on a fresh
  checkout, paid by the first run or the first Ray workers of a sweep, several of them at once).
* The MLflow schema template (``tracking.schema``): an empty store with MLflow's complete
  schema, copied for each new sqlite store instead of running MLflow's migrations (about 4 s).
* The run config's key index (``config.keys``): a bad key is then refused before torch's
  import from the first command on (``fedsweep.cli.early``), not only after a full validation
  wrote the index.

Nothing here is required: a kernel that cannot compile leaves its runs on the per-step path
(as at run time), and an unusable cache folder leaves each store to run the migrations. Exit
code 0 in every case; one line per item says what happened and how long it took.
"""

from __future__ import annotations

import time


def _kernels() -> str:
    import torch

    from fedsweep.engine.fast import svm_trajectory as svm_kernel
    from fedsweep.engine.fast.balancing import balance_compiled
    from fedsweep.engine.fast.estimates import step_sums
    from fedsweep.engine.fast.herding import _compiled_kernel, herd_compiled

    if svm_kernel.kernel() is None or _compiled_kernel() is None:
        return "unavailable (numba missing or disabled): runs keep the per-step path"
    traj = svm_kernel.SVMTrajectory(0.1)
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(32, 784, generator=g, dtype=dtype)
        target = torch.randint(0, 10, (32,), generator=g)
        rows = torch.arange(32).reshape(4, 8)
        w = torch.zeros(784, dtype=dtype)
        grads, iterates = torch.empty(4, 784, dtype=dtype), torch.empty(4, 784, dtype=dtype)
        traj(w.clone(), w, x, target, rows, 0.1, 0.0, None, grads, None, iterates)
        if herd_compiled(grads, 2) is None:
            return "the compiled herding did not run (non-finite test gradients?)"
        f64 = dict(dtype=torch.float64)
        for centre in (None, torch.zeros(784, **f64)):  # both of GraB's rules
            state = (
                torch.zeros(784, **f64),
                torch.zeros(784, **f64),
                torch.zeros(784, dtype=dtype),
            )
            if balance_compiled(grads, *state, torch.zeros(4, dtype=torch.bool), centre) is None:
                return "the compiled sign balancing did not run"
        zeros = torch.zeros(784, **f64)
        if step_sums(iterates, grads, grads, zeros, zeros, 0.1) is None:
            return "the compiled per-step sums did not run"
    return (
        "fused SVM trajectory and compiled herding, sign balancing and per-step sums, "
        "float32 and float64"
    )


def _schema() -> str:
    from fedsweep.tracking.schema import schema_template

    path = schema_template()
    return str(path) if path is not None else "no usable cache folder (stores migrate themselves)"


def _key_index() -> str:
    from fedsweep.config import keys
    from fedsweep.config.load import write_key_index

    write_key_index()
    return "written" if keys.load_index() is not None else "no usable cache folder"


def main() -> None:
    builds = (
        ("kernels", _kernels),
        ("MLflow schema template", _schema),
        ("config key index", _key_index),
    )
    for name, build in builds:
        start = time.perf_counter()
        try:
            what = build()
        except Exception as err:  # noqa: BLE001 - a warm-up never fails the install
            what = f"skipped ({type(err).__name__}: {err})"
        print(f"warm-up: {name}: {what} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
