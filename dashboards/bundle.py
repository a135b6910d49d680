"""A study another lab can check (issue 65): ``fedsweep bundle`` writes one figure's evidence
as one archive, ``fedsweep verify`` checks it on another machine.

The archive (:mod:`fedsweep.core.archive`: a ``.tar.gz`` with a manifest of SHA-256s) holds

* ``spec.yaml``: the figure's spec, its ``extends:`` chain resolved (it loads on its own);
* ``runs.json``: per trial of the figure that has a run, its key (panel, curve, seed), config
  hash, full typed config, status, the loss blow-up tag, and every metric it logged, round by
  round (``history``) and its last value (``final``); not the ``Global/`` copies nor the
  timings (:data:`TIMING_METRICS`);
* ``claims.json``: the figure's claims as ``fedsweep report --json`` gives them;
* ``<figure>.html`` (and ``<figure>.png`` with ``--png``): the figure as drawn;
* ``environment.json``: Python, platform, CPU model, torch version and build, its CPU
  capability (``torch.backends.cpu.get_cpu_capability()``), package versions.

:func:`verify_bundle` rebuilds the verdicts from the bundle's run table: it writes the runs
into a temporary local MLflow store (each trial's run tagged with its config hash and status,
its metric histories logged as they were) and judges the bundled spec's claims from it with
:func:`fedsweep.judge.judge`, as ``fedsweep figures`` and ``report`` do, so a verdict is
computed exactly as it was (nothing of the judging is re-implemented here, nothing is drawn). It then reruns K sampled
trials in this process (``fedsweep.experiment``: no Ray, no MLflow) from their bundled configs,
after checking each config hashes to its bundled hash, and compares every bundled metric at
every round: bit-identical where the environment matches (:func:`same_build`), else within
:func:`tolerance`.
"""

from __future__ import annotations

import json
import math
import platform
import random
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from fedsweep.core.archive import BundleError, now_fields, read_archive, write_archive

#: metrics a rerun cannot repeat (wall-clock times): not bundled, not compared
TIMING_METRICS = ("round_time",)
#: the prefix of the copies of the global metrics for MLflow's UI (tracking.run_logger)
GLOBAL_PREFIX = "Global/"
#: the members of a bundle, beside the figure's HTML/PNG
SPEC, RUNS, CLAIMS, ENVIRONMENT = "spec.yaml", "runs.json", "claims.json", "environment.json"
#: tolerances where the environment differs (docs/how-to/bundles.md): a loss (and any other
#: metric) relative ``RELATIVE`` with an absolute floor ``ABSOLUTE``; an accuracy one test
#: example (1 / the test set's size)
RELATIVE = 1e-4
ABSOLUTE = 1e-9
#: the packages whose versions environment.json records
PACKAGES = ("numpy", "pandas", "torch", "mlflow", "ray", "pydantic", "plotly", "scipy")
#: a bundle's default file name
SUFFIX = ".fedsweep.tar.gz"


def bundle_name(figure: str, profile: str) -> str:
    return f"{figure}-{profile}{SUFFIX}"


# ------------------------------------------------------------------------------- environment
def environment() -> dict[str, Any]:
    """What a rerun's numbers depend on besides the config: Python, platform, CPU model, torch
    (version, git commit, CUDA, CPU capability) and package versions."""
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "torch": {
            "version": torch.__version__,
            "git_version": getattr(torch.version, "git_version", None),
            "cuda": torch.version.cuda,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
        },
        "packages": versions,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def build_key(env: dict[str, Any]) -> tuple:
    """What must be equal for bit-identical reruns: the machine's architecture, torch's
    version, commit and CUDA build, and the CPU capability its kernels were chosen for."""
    t = env.get("torch") or {}
    return (
        env.get("machine"),
        t.get("version"),
        t.get("git_version"),
        t.get("cuda"),
        t.get("cpu_capability"),
    )


def same_build(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return build_key(a) == build_key(b)


# ------------------------------------------------------------------------------------ writing
def make_bundle(
    spec_path: Path, profile: str, tracking_uri: str, out: Path, *, png: bool = False
) -> tuple[Path, dict[str, Any]]:
    """Write the bundle of the figure of ``spec_path`` at ``profile`` from the store
    ``tracking_uri`` to ``out``; the path and the manifest. :class:`ValueError` when the
    figure has no run in the store or could not be built."""
    import yaml

    from dashboards.build import FigureBuildWarning, build_figures
    from dashboards.report import claim_rows
    from fedsweep import __version__
    from fedsweep.judge.store import RunIndex, resolve_runs
    from fedsweep.specs.extends import spec_tree
    from fedsweep.specs.load import load_spec
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.run_logger import git_commit

    spec = load_spec(spec_path)
    tree = spec_tree(spec_path.resolve(), (), load=load_spec)
    tree.pop("extends", None)  # merged in: the spec stands alone
    spec_text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True)
    client = get_client(tracking_uri, create=False)
    res = resolve_runs(spec, profile, RunIndex.load(client), client=client)
    if not res.found:
        raise ValueError(
            f"{spec.figure}: no runs at --profile {profile} in {tracking_uri} (nothing to "
            f"bundle); run them: fedsweep sweep {spec.figure} --profile {profile}"
        )
    runs = [_run_entry(client, tr) for tr in res.found]
    with tempfile.TemporaryDirectory(prefix="fedsweep-bundle-") as tmp:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FigureBuildWarning)
            (result,) = build_figures(
                tracking_uri, profile=profile, out_dir=tmp, spec_files=[spec_path],
                png=png, images=("png",), extras=False, require_store=True,
            )  # fmt: skip
        if result.error:
            raise ValueError(f"{spec.figure}: the figure could not be built: {result.error}")
        members = {
            SPEC: spec_text.encode(),
            RUNS: _json({"figure": spec.figure, "profile": profile, "runs": runs}),
            CLAIMS: _json(claim_rows([result])),
            ENVIRONMENT: _json(environment()),
        }
        for path in result.files:
            if path.suffix in (".html", ".png") and path.name.startswith(spec.figure):
                members[path.name] = path.read_bytes()
    manifest = {
        "fedsweep_version": __version__,
        "git_commit": git_commit(),
        "figure": spec.figure,
        "profile": profile,
        "seeds": res.seeds,
        "runs": len(runs),
        "expected_runs": len(res.trials),
        **now_fields(),
    }
    return write_archive(out, members, manifest), manifest


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=1, ensure_ascii=False).encode()


def _run_entry(client, tr) -> dict[str, Any]:
    """One trial's row of ``runs.json``: its key, hash, typed config and metric histories."""
    from fedsweep.judge.store import BLOWUP_TAG

    t = tr.trial
    history: dict[str, list[list[float]]] = {}
    for key in sorted(tr.run.metrics):
        if key.startswith(GLOBAL_PREFIX) or key in TIMING_METRICS:
            continue
        points = sorted(client.get_metric_history(tr.run.run_id, key), key=lambda m: m.step)
        history[key] = [[int(m.step), float(m.value)] for m in points]
    return {
        "panel": t.panel_id,
        "panel_label": t.panel_label,
        "curve": t.curve,
        "seed": t.seed,
        "config_hash": t.config_hash,
        "status": tr.run.status,
        "blowup": tr.run.tags.get(BLOWUP_TAG),
        "config": t.config.model_dump(mode="json"),
        "final": {k: v[-1][1] for k, v in history.items() if v},
        "history": history,
    }


# ------------------------------------------------------------------------------------ reading
@dataclass
class Bundle:
    """A bundle read and checked against its manifest."""

    path: Path
    manifest: dict[str, Any]
    members: dict[str, bytes]
    runs: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    environment: dict[str, Any]
    spec_text: str

    @property
    def figure(self) -> str:
        return str(self.manifest.get("figure"))

    @property
    def profile(self) -> str:
        return str(self.manifest.get("profile"))


def read_bundle(path: str | Path) -> Bundle:
    """The bundle at ``path``, every member's SHA-256 checked (:func:`read_archive`) and its
    tables' shape checked; :class:`BundleError` naming the member otherwise."""
    from fedsweep.specs.load import PROFILES

    path = Path(path)
    manifest, members = read_archive(path)
    for name in (SPEC, RUNS, CLAIMS, ENVIRONMENT):
        if name not in members:
            raise BundleError(f"bundle {path}: no member {name}", name)
    table = _member_json(path, members, RUNS)
    runs = table.get("runs") if isinstance(table, dict) else None
    claims = _member_json(path, members, CLAIMS)
    env = _member_json(path, members, ENVIRONMENT)
    if manifest.get("profile") not in PROFILES:
        raise BundleError(
            f"bundle {path}: manifest profile {manifest.get('profile')!r} (allowed: "
            f"{', '.join(PROFILES)})",
            "manifest.json",
        )
    if not isinstance(runs, list) or not all(_run_ok(r) for r in runs):
        raise BundleError(f"bundle {path}: {RUNS}: not a run table of this format", RUNS)
    if not isinstance(claims, list) or not all(isinstance(c, dict) for c in claims):
        raise BundleError(f"bundle {path}: {CLAIMS}: not a list of claims", CLAIMS)
    if not isinstance(env, dict):
        raise BundleError(f"bundle {path}: {ENVIRONMENT}: not an object", ENVIRONMENT)
    try:
        spec_text = members[SPEC].decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(f"bundle {path}: {SPEC} is not UTF-8 text", SPEC) from None
    return Bundle(path, manifest, members, runs, claims, env, spec_text)


def _member_json(path: Path, members: dict[str, bytes], name: str) -> Any:
    try:
        value = json.loads(members[name].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BundleError(f"bundle {path}: {name} is not JSON: {err}", name) from None
    return value


def _run_ok(run: Any) -> bool:
    if not isinstance(run, dict):
        return False
    keys = {"panel": str, "curve": str, "seed": int, "config_hash": str, "status": str}
    if not all(isinstance(run.get(k), t) for k, t in keys.items()):
        return False
    history = run.get("history")
    if not isinstance(run.get("config"), dict) or not isinstance(history, dict):
        return False
    return all(
        isinstance(points, list)
        and all(
            isinstance(p, list)
            and len(p) == 2
            and isinstance(p[0], int)
            and isinstance(p[1], (int, float))
            for p in points
        )
        for points in history.values()
    )


def trial_label(run: dict[str, Any]) -> str:
    """``panel · curve · seed N`` (the panel's label where it has one)."""
    panel = run.get("panel_label") or run.get("panel") or "-"
    return f"{panel} · {run['curve']} · seed {run['seed']}"


# ---------------------------------------------------------------------------------- verifying
@dataclass
class Mismatch:
    """A difference: a trial's metric (at a round), or a claim's verdict or effect."""

    what: str  # "metric" | "config" | "status" | "claim"
    text: str


@dataclass
class TrialCheck:
    run: dict[str, Any]
    metrics: int = 0
    rounds: int = 0
    mismatch: Mismatch | None = None


@dataclass
class ClaimCheckRow:
    key: str
    bundled: str
    rebuilt: str
    matched: bool
    note: str = ""


@dataclass
class Verification:
    bundle: Bundle
    exact: bool
    seed: int
    sampled: list[TrialCheck] = field(default_factory=list)
    claims: list[ClaimCheckRow] = field(default_factory=list)

    @property
    def mismatches(self) -> list[Mismatch]:
        out = [t.mismatch for t in self.sampled if t.mismatch is not None]
        out += [Mismatch("claim", c.note) for c in self.claims if not c.matched]
        return out


def unique_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bundle's runs, one per config hash (trials of one config share one run), in the
    table's order (panel, curve, seed)."""
    seen: dict[str, dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: (r["panel"], r["curve"], r["seed"])):
        seen.setdefault(run["config_hash"], run)
    return list(seen.values())


def sample_runs(runs: list[dict[str, Any]], k: int, seed: int) -> list[dict[str, Any]]:
    """``k`` of ``runs`` drawn with ``random.Random(seed)`` (all of them when ``k`` >= their
    count), in the table's order."""
    pool = unique_runs(runs)
    chosen = sorted(random.Random(seed).sample(range(len(pool)), min(k, len(pool))))
    return [pool[i] for i in chosen]


def verify_bundle(
    bundle: Bundle,
    sample: int,
    seed: int,
    *,
    data_dir: str | None = None,
    on_trial: Callable[[TrialCheck], None] | None = None,
) -> Verification:
    """Rebuild the verdicts, then rerun ``sample`` trials drawn with ``seed`` (see the module
    docstring); ``on_trial`` is told each trial's result as it comes."""
    here = environment()
    check = Verification(bundle, same_build(here, bundle.environment), seed)
    check.claims = rebuild_claims(bundle)
    for run in sample_runs(bundle.runs, sample, seed):
        result = rerun_trial(run, exact=check.exact, data_dir=data_dir)
        check.sampled.append(result)
        if on_trial is not None:
            on_trial(result)
    return check


def rebuild_claims(bundle: Bundle) -> list[ClaimCheckRow]:
    """The figure's claims judged again from the bundle's run table (a temporary local MLflow
    store built from it, its runs found by config hash as ``fedsweep report`` finds them, then
    the judge on the bundled spec's plan: nothing drawn), compared with the bundled claims by
    id and regime: verdict and effect."""
    from dashboards.report import judged_rows
    from fedsweep.core import atomic
    from fedsweep.judge.store import RunIndex
    from fedsweep.specs.figure import figure_plan
    from fedsweep.specs.load import load_spec
    from fedsweep.tracking.connect import get_client

    with tempfile.TemporaryDirectory(prefix="fedsweep-verify-") as tmp:
        folder = Path(tmp)
        spec_file = atomic.write_text(folder / f"{bundle.figure}.yaml", bundle.spec_text)
        uri = f"sqlite:///{(folder / 'mlruns' / 'mlflow.db').as_posix()}"
        store_runs(uri, bundle.figure, bundle.runs)
        try:
            plan = figure_plan(load_spec(spec_file), bundle.profile)
            client = get_client(uri, create=False)
            judged = judged_rows(plan, client, RunIndex.load(client))
        except Exception as err:  # noqa: BLE001 - a bundle that cannot be judged says why
            why = "".join(traceback.format_exception_only(err)).strip()
            return [ClaimCheckRow("(claims)", "judged", "failed", False, f"claims: {why}")]
    rebuilt = {_claim_key(r): r for r in judged}
    rows = []
    for claim in bundle.claims:
        key = _claim_key(claim)
        again = rebuilt.pop(key, None)
        if again is None:
            why = f"claim {key}: not in the figure rebuilt from the bundle's runs"
            rows.append(ClaimCheckRow(key, str(claim.get("verdict")), "-", False, why))
            continue
        same = claim.get("verdict") == again.get("verdict") and _same_number(
            claim.get("effect"), again.get("effect")
        )
        note = ""
        if not same:
            note = (
                f"claim {key}: bundle says {claim.get('verdict')} (effect "
                f"{claim.get('effect')}), rebuilt from its runs: {again.get('verdict')} "
                f"(effect {again.get('effect')})"
            )
        rows.append(
            ClaimCheckRow(key, str(claim.get("verdict")), str(again["verdict"]), same, note)
        )
    for key, again in rebuilt.items():
        why = f"claim {key}: judged from the bundle's runs but not in its claims.json"
        rows.append(ClaimCheckRow(key, "-", str(again.get("verdict")), False, why))
    return rows


def _claim_key(row: dict[str, Any]) -> str:
    name = row.get("id") or row.get("claim") or "?"
    regime = row.get("regime")
    return name if regime in (None, "not declared") else f"{name} [{regime}]"


def _same_number(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def store_runs(uri: str, figure: str, runs: list[dict[str, Any]]) -> None:
    """A fresh local MLflow store at ``uri`` with one done run per config hash of ``runs``:
    tagged with its hash, status and blow-up text, its metric histories logged as bundled."""
    import yaml

    from fedsweep.judge.store import BLOWUP_TAG
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.run_logger import CONFIG_FILE
    from fedsweep.tracking.runstore import open_store
    from fedsweep.tracking.store import ensure_experiment

    experiment = ensure_experiment(get_client(uri), figure, uri)  # creates the store
    store = open_store(uri, figure)
    for run in unique_runs(runs):
        tags = {"fedsweep.config_hash": run["config_hash"], "fedsweep.figure": figure}
        run_id, _ = store.create_run(experiment, tags, trial_label(run))
        # its config, as the run logger writes it: figures draw a run only when its logged
        # config hashes to its tag (``fedsweep.tracking.provenance``)
        text = yaml.safe_dump(run["config"], sort_keys=False)
        store.log_text(run_id, store.artifact_uri(run_id), text, CONFIG_FILE)
        rows = [
            (key, float(value), 0, int(step))
            for key, points in run["history"].items()
            for step, value in points
        ]
        store.write_metrics(run_id, rows)
        end = {"fedsweep.status": run["status"]}
        if run.get("blowup"):
            end[BLOWUP_TAG] = str(run["blowup"])
        store.end_run(run_id, "FINISHED", end)


def rerun_trial(run: dict[str, Any], *, exact: bool, data_dir: str | None = None) -> TrialCheck:
    """Rerun one bundled trial in this process from its config and compare every bundled
    metric at every round (the first difference is the mismatch)."""
    from fedsweep.config.hashing import config_hash
    from fedsweep.config.load import build_config
    from fedsweep.experiment import FLRun, run_federated

    check = TrialCheck(run)
    label = trial_label(run)
    config = build_config(run["config"], source=f"bundled config of {label}", unused="keep")
    got = config_hash(config)
    if got != run["config_hash"]:
        check.mismatch = Mismatch(
            "config",
            f"{label} (hash {run['config_hash']}): its bundled config hashes to {got} here "
            "(a changed config, or another fedsweep's hash)",
        )
        return check
    update = {"tracking": config.tracking.model_copy(update={"enabled": False})}
    if data_dir is not None:
        update["data"] = config.data.model_copy(update={"root": data_dir})
    config = config.model_copy(update=update)
    rounds: dict[int, dict[str, float]] = {}

    def collect(t, metrics, result) -> None:
        rounds[t] = dict(metrics)

    fl = FLRun(config)
    result = run_federated(fl, [*fl.watches(), collect])
    test_size = int(fl.y_test.shape[0])
    check.metrics = len(run["history"])
    check.rounds = len(rounds)
    for key in sorted(run["history"]):
        bundled = {int(step): float(value) for step, value in run["history"][key]}
        again = {t: m[key] for t, m in rounds.items() if key in m}
        for t in sorted(set(bundled) | set(again)):
            a, b = bundled.get(t), again.get(t)
            if a is None or b is None or not _agrees(key, a, b, exact, test_size):
                shown = "not logged" if a is None else repr(a)
                rerun = "not logged" if b is None else repr(b)
                how = "bit-identical" if exact else f"within {tolerance_text(key, test_size)}"
                check.mismatch = Mismatch(
                    "metric",
                    f"{label} (hash {run['config_hash']}): {key} at round {t}: bundle "
                    f"{shown}, rerun {rerun} (expected {how})",
                )
                return check
    if result.status != run["status"]:
        check.mismatch = Mismatch(
            "status",
            f"{label} (hash {run['config_hash']}): status: bundle {run['status']}, rerun "
            f"{result.status}",
        )
    return check


def tolerance(key: str, test_size: int) -> tuple[float, float]:
    """(relative, absolute) tolerance of metric ``key`` where the environment differs: an
    accuracy (``..._acc``) one test example, 1/``test_size``; any other metric (a loss, a
    distance) relative :data:`RELATIVE` with the absolute floor :data:`ABSOLUTE`."""
    if key.rsplit("/", 1)[-1].endswith("acc"):
        return 0.0, 1.0 / max(1, test_size) + 1e-12
    return RELATIVE, ABSOLUTE


def tolerance_text(key: str, test_size: int) -> str:
    rel, absolute = tolerance(key, test_size)
    if rel == 0.0:
        return f"absolute {absolute:.3g} (1/{test_size} test examples)"
    return f"relative {rel:g} (absolute floor {absolute:g})"


def _agrees(key: str, a: float, b: float, exact: bool, test_size: int) -> bool:
    a, b = _as_logged(a), _as_logged(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if exact or math.isinf(a) or math.isinf(b):
        return a == b
    rel, absolute = tolerance(key, test_size)
    return abs(a - b) <= max(absolute, rel * max(abs(a), abs(b)))


def _as_logged(x: float) -> float:
    """MLflow stores +-inf as +-the largest float: read back as the infinity it was."""
    return math.copysign(math.inf, x) if abs(x) == sys.float_info.max else x
