"""``make bench``: the cost of a local step and of a round, next to the machine's limits.

``python -m fedsweep.bench [--models svm,cnn] [--json] ...`` (:func:`main`): the rows of
:mod:`fedsweep.bench.local_step`, :mod:`~fedsweep.bench.resnet`, :mod:`~fedsweep.bench.divfl`
and :mod:`~fedsweep.bench.sweep_overhead`; ``--from-store URI`` only prints
:mod:`~fedsweep.bench.store_overheads`. See :mod:`fedsweep.bench` for what each row measures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from fedsweep.bench.divfl import bench_divfl, divfl_child
from fedsweep.bench.local_step import MAX_PAIRS, PAIR_SECONDS, bench_model
from fedsweep.bench.refusals import bench_refusals
from fedsweep.bench.resnet import bench_resnet_step
from fedsweep.bench.store_overheads import print_store_overheads
from fedsweep.bench.sweep_overhead import SWEEP_PAIRS, bench_sweep
from fedsweep.bench.workload import BATCH, CLIENTS, STEPS, STEPS_PER_CLIENT, synthetic_mnist
from fedsweep.core.device import keep_freed_memory, set_threads
from fedsweep.engine.fast import svm_trajectory as svm_kernel


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m fedsweep.bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--models", default="svm,cnn")
    parser.add_argument("--variants", default="fedavg,bherd,grab,fedveca")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--pair-seconds",
        type=float,
        default=PAIR_SECONDS,
        help="seconds of paired rounds per engine row for its ÷ FedAvg (at least --repeats "
        f"pairs, at most {MAX_PAIRS})",
    )
    parser.add_argument("--no-resnet", action="store_true", help="skip the ResNet-18 step")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep overhead")
    parser.add_argument(
        "--no-refusals", action="store_true", help="skip the time to refuse bad inputs"
    )
    parser.add_argument(
        "--divfl-clients",
        type=int,
        default=5000,
        help="clients of the DivFL distance-table row (e.g. 20000: 1.6 GB of table, minutes); "
        "0 skips it",
    )
    parser.add_argument(
        "--divfl-threads", type=int, default=None, help="threads of the DivFL row (default: all)"
    )
    parser.add_argument("--divfl-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sweep-spec",
        default=None,
        help="measure the sweep overhead on this spec file (default: a built-in smoke sweep)",
    )
    parser.add_argument("--sweep-profile", default="smoke", help="profile of --sweep-spec")
    parser.add_argument(
        "--sweep-pairs",
        type=int,
        default=SWEEP_PAIRS,
        help="times the sweep and Ray Tune's floor are measured, alternately, each in a fresh "
        "interpreter; the medians are reported, the range of fedsweep's share above the floor "
        f"beside it (default {SWEEP_PAIRS})",
    )
    parser.add_argument(
        "--from-store",
        metavar="URI",
        default=None,
        help="only print the overhead of every sweep already in this MLflow store (e.g. "
        "sqlite:///$PWD/mlruns/mlflow.db after make reproduce-figures); measures nothing",
    )
    parser.add_argument("--profile", default=None, help="with --from-store: only this profile")
    parser.add_argument("--json", action="store_true", help="a JSON summary as the last line")
    args = parser.parse_args(argv)
    if args.divfl_child:  # bench_divfl's fresh interpreter
        clients, features, threads = (int(v) for v in args.divfl_child.split(","))
        print(json.dumps(divfl_child(clients, features, threads or None)))
        return
    if args.from_store:
        print_store_overheads(args.from_store, args.profile, args.json)
        return
    threads = set_threads(None)
    data = synthetic_mnist()
    g = torch.Generator().manual_seed(1)
    batches = torch.stack(
        [
            torch.randperm(60000, generator=g)[: STEPS_PER_CLIENT * BATCH].view(
                STEPS_PER_CLIENT, BATCH
            )
            for _ in range(CLIENTS)
        ]
    )
    variants = [v for v in args.variants.split(",") if v]
    if "fedavg" not in variants:
        variants.insert(0, "fedavg")
    summary: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "threads": threads,
        "fused_kernel": svm_kernel.kernel() is not None,
        "freed_memory_kept": keep_freed_memory(),
    }
    print(
        f"# fedsweep bench  {summary['date']}  {summary['machine']}  torch {torch.__version__}"
        f"  threads={threads}  fused SVM kernel: {'yes' if summary['fused_kernel'] else 'no'}"
        f"  freed memory kept: {'yes' if summary['freed_memory_kept'] else 'no'}"
    )
    print(
        f"# one round = {CLIENTS} clients x {STEPS_PER_CLIENT} steps of B={BATCH} + test eval; "
        f"median of {args.repeats}; ÷ FedAvg: engine rows the median ratio of adjacent pairs "
        f"of rounds (up to {MAX_PAIRS} pairs, {args.pair_seconds:g} s a row), proxy and floor the "
        "median of the per-repeat ratios; "
        f"µs/step = s/round / {STEPS} (evaluation included)"
    )
    print("| model | path | s/round | µs/step | ÷ FedAvg | ÷ limit proxy |")
    print("|---|---|---:|---:|---:|---:|")
    labels = {
        "proxy": "limit proxy (hand loop)",
        "floor": "memory floor (read each batch once, no eval)",
        "fedavg": "FedAvg",
        "fedavg_per_step": "FedAvg, per-step path",
        "bherd": "BHerd-FedAvg",
        "grab": "GraB-FedAvg",
        "fedveca": "FedVeca (fixed τ)",
    }
    for model in args.models.split(","):
        med, ratio = bench_model(model, data, batches, args.repeats, variants, args.pair_seconds)
        if model != "svm":
            labels["proxy"] = "limit proxy (raw nn.Module loop)"
        for key, value in med.items():
            print(
                f"| {model} | {labels[key]} | {value:.4f} | {value / STEPS * 1e6:.1f} "
                f"| {ratio[key]:.3f} | {value / med['proxy']:.3f} |"
            )
        summary[model] = {k: round(v, 6) for k, v in med.items()}
        summary[f"{model}_us_per_step"] = round(med["fedavg"] / STEPS * 1e6, 2)
        summary[f"{model}_proxy_us_per_step"] = round(med["proxy"] / STEPS * 1e6, 2)
        if "floor" in med:
            summary[f"{model}_memory_floor_us_per_step"] = round(med["floor"] / STEPS * 1e6, 2)
        for name in variants[1:]:
            summary[f"{name}_over_fedavg" + ("" if model == "svm" else f"_{model}")] = round(
                ratio[name], 4
            )
        if model == "svm" and "fedavg_per_step" in med:
            summary["svm_per_step_us_per_step"] = round(med["fedavg_per_step"] / STEPS * 1e6, 2)
    if not args.no_resnet:
        res = bench_resnet_step(max(1, args.repeats))
        print(
            f"\n# ResNet-18 on CIFAR-shaped 3x32x32, B=32, one local step: engine "
            f"{res['engine'] * 1e3:.1f} ms, raw loop {res['raw'] * 1e3:.1f} ms "
            f"(engine ÷ raw {res['engine'] / res['raw']:.3f}; {max(1, args.repeats)} rounds of 5 "
            "steps, no evaluation)"
        )
        summary["resnet18_ms_per_step"] = round(res["engine"] * 1e3, 2)
        summary["resnet18_raw_ms_per_step"] = round(res["raw"] * 1e3, 2)
    if args.divfl_clients > 0:
        dv = bench_divfl(args.divfl_clients, threads=args.divfl_threads)
        mib = 1 << 20
        threads = "1 thread" if dv["threads"] == 1 else f"{dv['threads']} threads"
        print(
            f"\n# DivFL distance table, {dv['clients']:,} clients x {dv['features']} features "
            f"(float32 gradients, float64 table, {threads}, fresh process): "
            f"{dv['seconds']:.1f} s; peak RSS {dv['peak_rss_bytes'] / mib:.0f} MiB, "
            f"{dv['build_bytes'] / mib:.0f} MiB above the {dv['rss_before_bytes'] / mib:.0f} MiB "
            f"before the build, of which the table is {dv['table_bytes'] / mib:.0f} MiB "
            f"(4 N(N-1), packed): "
            f"{(dv['build_bytes'] - dv['table_bytes']) / mib:.1f} MiB besides it "
            f"(bound on the scratch: {dv['scratch_bound_bytes'] / mib:.0f} MiB)"
        )
        summary["divfl"] = dv
        summary["divfl_build_s"] = round(dv["seconds"], 3)
        summary["divfl_build_mib"] = round(dv["build_bytes"] / mib, 1)
    if not args.no_sweep:
        sw = bench_sweep(args.sweep_spec, args.sweep_profile, pairs=args.sweep_pairs)
        print(
            f"\n# sweep overhead (medians of {sw['pairs']} sweeps, each in a fresh interpreter): "
            f"{sw['spec']} at {sw['profile']}, {sw['trials']} trials in "
            f"{sw['wall_s']:.1f} s wall; the runs' own round times sum to {sw['runs_own_s']:.1f} s "
            f"({sw['ideal_wall_s']:.1f} s spread over the CPUs); overhead "
            f"{sw['overhead'] * 100:.0f}%: {sw['s_before_first_trial']:.1f} s before the first "
            f"trial's run opens ({sw['cpu_s_before_first_trial']:.1f} CPU-s of work, the CPUs "
            f"{sw['cpu_busy_before_first_trial'] * 100:.0f}% busy), "
            f"{sw['s_per_trial_outside_rounds']:.2f} s per trial outside its rounds, "
            f"{sw['s_per_trial_start']:.2f} s per trial in all"
        )
        if "tune_floor_wall_s" in sw:
            print(
                "# Ray Tune's floor for the same trials (a fresh Ray, trials that only keep a "
                f"CPU busy for their rounds' time): {sw['tune_floor_wall_s']:.1f} s wall, overhead "
                f"{sw['tune_floor_overhead'] * 100:.0f}%; with each actor importing torch and "
                f"MLflow: {sw['tune_floor_imports_wall_s']:.1f} s, "
                f"{sw['tune_floor_imports_overhead'] * 100:.0f}%; fedsweep above that floor: "
                f"{sw['fedsweep_overhead'] * 100:.0f}% of the ideal wall time (median of "
                f"{sw['pairs']} pairs of a sweep and its floor, measured alternately; range "
                f"{sw['fedsweep_overhead_min'] * 100:.0f}–{sw['fedsweep_overhead_max'] * 100:.0f}%)"
            )
        summary["sweep"] = {k: _rounded(v) for k, v in sw.items()}
        summary["sweep_overhead"] = round(sw["overhead"], 4)
    if not args.no_refusals:
        rows = bench_refusals(args.repeats)
        print(
            f"\n# time to refuse a bad input (a whole command, fresh Python, median of "
            f"{max(1, args.repeats)}; exit code, stderr lines)"
        )
        print("| command | s | exit | lines |")
        print("|---|---:|---:|---:|")
        for row in rows:
            codes = ",".join(map(str, row["exit_codes"]))
            print(f"| {row['command']} | {row['median_s']:.2f} | {codes} | {row['stderr_lines']} |")
        summary["refusals"] = {r["command"]: round(r["median_s"], 3) for r in rows}
    if args.json:
        print(json.dumps(summary, sort_keys=True))


def _rounded(value):
    """A JSON value of the summary: floats (also in a list) to 3 decimals."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value
