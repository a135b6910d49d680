"""``build_figures``: specs -> runs (by config hash) -> Plotly figures -> HTML, PNG/PDF/SVG,
index.html.

Every spec can be drawn: a figure id with a registered builder (``registry.BUILDERS``, the
papers' figures) uses it, any other spec the generic layout (:mod:`dashboards.generic`). Specs
come from ``sweeps_dir`` (by figure id) or from explicit paths (``spec_files``, e.g. a user's
``my-alpha-study.yaml`` outside ``sweeps/``).

Beside each figure's HTML and images: ``<stem>.csv``, every curve it draws
(``export.curve_table``), and per figure ``<id>-parcoords.html``, its runs as parallel
coordinates (:mod:`dashboards.parcoords`), with their table ``<id>-runs.csv``. Curves that
coincide are marked (``style.mark_coinciding``). A figure of ``--set`` runs is written under its
own stem, ``<id>--<key>-<value>`` (:func:`override_stem`; the result's ``figure_id`` stays the
spec's id), as its own index entry: the figure's files and entry as configured stay as they
are.
"""

from __future__ import annotations

import json
import os
import re
import traceback
import warnings
from pathlib import Path
from typing import Any

from dashboards import generic
from dashboards.export import (
    IMAGE_FORMATS,
    OutputFolderError,
    PngJob,
    curves_csv,
    output_folder,
    write_html,
    write_pngs,
)
from dashboards.index import ENTRY_KEY, EXTRA_FILES, TEXT_FORMATS, override_stem, write_index
from dashboards.model import BuildContext, FigureDataError, FigureOptions, FigureResult
from dashboards.registry import BUILDERS, METRIC_KEYS
from dashboards.style import BANDS, mark_coinciding
from fedsweep.core import atomic
from fedsweep.judge import judge
from fedsweep.judge.store import RunIndex, load_runs
from fedsweep.specs.figure import figure_plan
from fedsweep.specs.load import (
    PROFILES,
    SpecError,
    SweepSpec,
    load_spec,
    shadow_warning,
    spec_paths,
    sweeps_home,
)

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


class FigureSelectionError(ValueError):
    """An unknown figure id, profile, band or image format (the CLI turns it into exit 2)."""


class FigureBuildWarning(UserWarning):
    """A figure builder raised; the figure is listed in the index with the error."""


def builder_for(figure_id: str):
    """The registered builder of ``figure_id``, else the generic one."""
    return BUILDERS.get(figure_id, generic.build)


def load_specs(sweeps_dir: str | Path, wanted: list[str] | None) -> dict[str, SweepSpec]:
    """Specs of ``sweeps_dir`` by figure id. A spec that fails to load is an error only if it
    was asked for (by file stem) or if no figures were asked for. When every id of ``wanted``
    is the stem of a spec declaring that id (``sweeps/<id>.yaml``), only those are loaded
    (loading a spec checks every trial of every profile: seconds for a folder of them)."""
    specs: dict[str, SweepSpec] = {}
    errors: dict[str, SpecError] = {}
    folder = sweeps_home(sweeps_dir)  # ./sweeps, or the shipped specs where there is none
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise FigureSelectionError(
            f"--sweeps-dir {folder}: {what} (allowed: a folder of sweep specs, e.g. sweeps/; "
            "or draw spec files with --spec PATH)"
        )
    if wanted and all((folder / f"{fid}.yaml").is_file() for fid in wanted):
        for fid in dict.fromkeys(wanted):
            spec = load_spec(folder / f"{fid}.yaml")  # asked for: a broken one is an error
            if spec.figure != fid:
                break  # a file named after another id: look at every spec
            shadow_warning(folder / f"{fid}.yaml", fid, f"--figure {fid}")
            specs[fid] = spec
        else:
            return specs
        specs = {}
    for path in spec_paths(sweeps_dir):
        try:
            spec = load_spec(path)
        except SpecError as err:
            errors[path.stem] = err
            continue
        specs[spec.figure] = spec
    for stem, err in errors.items():
        if (wanted and stem in wanted) or not wanted:
            raise err
    return specs


def check_options(profile: str, options: FigureOptions, images: tuple[str, ...]) -> None:
    """Profile, band and image formats against their allowed values (before MLflow starts)."""
    from fedsweep.core.suggest import did_you_mean

    for what, value, allowed in (
        ("profile", profile, PROFILES),
        ("band", options.band, BANDS),
        *(("image format", f, IMAGE_FORMATS) for f in images),
    ):
        if value not in allowed:
            raise FigureSelectionError(
                f"unknown {what} {value!r}{did_you_mean(value, allowed)}; "
                f"allowed: {', '.join(allowed)}"
            )


def check_baseline(label: str | None, chosen: list[SweepSpec]) -> None:
    """``--diff-from`` must name a curve of one of the figures drawn (or a "Client i" curve of a
    per-client figure such as Fig. 4d)."""
    from fedsweep.core.suggest import did_you_mean

    if label is None or re.fullmatch(r"Client \d+", label):
        return
    labels = sorted({c.label for s in chosen for c in s.curve_list()})
    if not label.strip():
        raise FigureSelectionError(
            f"--diff-from {label!r}: an empty label names no curve; curves: "
            f"{', '.join(labels) or 'none'}"
        )
    if label not in labels:
        raise FigureSelectionError(
            f"--diff-from {label!r}: no curve with that label{did_you_mean(label, labels)}; "
            f"curves: {', '.join(labels)}"
        )


#: a per-client metric key as logged (``client/3/dist``) -> its pattern (``client/{i}/dist``)
CLIENT_KEY = re.compile(r"^client/\d+/")


def metric_pattern(key: str) -> str:
    """``client/3/dist`` -> ``client/{i}/dist``; other keys as they are."""
    return CLIENT_KEY.sub("client/{i}/", key)


def _pattern_problem(metric: str) -> str:
    """What is wrong with ``metric`` as a key or a per-client pattern, "" if nothing."""
    import string

    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(metric) if f is not None]
    except ValueError:
        return "not a metric key, nor a per-client pattern such as client/{i}/dist (a stray brace)"
    wrong = [f for f in fields if f != "i"]
    if wrong:
        return (
            f"unknown placeholder {{{wrong[0]}}}: a per-client pattern uses {{i}}, e.g. "
            "client/{i}/dist"
        )
    return ""


def check_metrics(
    metrics: tuple[str, ...] | list[str],
    chosen: list[SweepSpec],
    profile: str,
    index: RunIndex,
    overrides: dict[str, Any] | None = None,
) -> None:
    """``--metric``: each must be a key (or a ``client/{i}/NAME`` pattern) that the runs of the
    figures drawn logged (every run in the store when those figures have none), or one of
    their specs' metrics; else :class:`FigureSelectionError` with the nearest known metric,
    before anything is drawn or written (as ``fedsweep compare`` does)."""
    if not metrics:
        return
    from fedsweep.core.suggest import did_you_mean
    from fedsweep.judge.store import resolve_runs

    logged: set[str] = set()
    for spec in chosen:  # without a client: a derived curve's runs are its sources' kind
        for tr in resolve_runs(spec, profile, index, overrides).found:
            logged |= tr.run.metrics
    ids = [s.figure for s in chosen]
    names = ", ".join(ids) if len(ids) <= 3 else f"the {len(ids)} figures drawn"
    unlogged = f"none of the runs of {names} logged it"
    if not logged:
        logged = index.metric_keys
        unlogged = (
            f"{names} {'has' if len(ids) == 1 else 'have'} no runs, and no run in the store "
            "logged it"
            if logged
            else "no run logged it (the store holds no finished runs)"
        )
    known = logged | {metric_pattern(k) for k in logged} | {m for s in chosen for m in s.metrics}
    # a figure may name metrics by their last part (FedVeca's Fig. 6: tau = client/{i}/tau)
    keys = [METRIC_KEYS[f] for f in ids if f in METRIC_KEYS]
    shown = sorted({metric_pattern(k) for k in known})
    for metric in metrics:
        if metric in known or any(key(metric) in known for key in keys):
            continue
        problem = _pattern_problem(metric) or unlogged
        raise FigureSelectionError(
            f"--metric {metric!r}: {problem}{did_you_mean(metric, shown)}; "
            f"metrics: {', '.join(shown) or 'none'}"
        )


def select(
    specs: dict[str, SweepSpec], figures: list[str] | None, extra: list[SweepSpec]
) -> list[str]:
    """The figure ids to draw: ``figures`` (each must be a spec of the folder or of ``extra``),
    else ``extra``'s ids when given, else every spec of the folder."""
    from fedsweep.core.suggest import did_you_mean

    if not figures:
        return [s.figure for s in extra] if extra else sorted(specs)
    unknown = [f for f in figures if f not in specs]
    if unknown:
        allowed = sorted(specs)
        hint = did_you_mean(unknown[0], allowed)
        raise FigureSelectionError(
            f"unknown figure id {unknown[0]!r}{hint}; allowed: {', '.join(allowed) or 'none'}"
            " (or draw any spec file with --spec PATH)"
        )
    return list(dict.fromkeys(figures + [s.figure for s in extra]))


def experiment_url(client, figure_id: str, ui_url: str) -> str:
    """The MLflow experiment named ``figure_id`` under ``ui_url``, in fedsweep's saved view
    (every trial flat and charted: ``fedsweep.tracking.store.ui_path``), "" if none."""
    from fedsweep.tracking.store import VIEW_TAG
    from fedsweep.tracking.store import ui_url as experiment_link

    if client is None or not ui_url:
        return ""
    try:
        exp = client.get_experiment_by_name(figure_id)
    except Exception:  # noqa: BLE001 - a link is optional
        return ""
    if exp is None:
        return ""
    return experiment_link(ui_url, exp.experiment_id, view=VIEW_TAG in (exp.tags or {}))


def build_figures(
    tracking_uri: str | None,
    profile: str = "quick",
    out_dir: str | Path = "figures",
    figures: list[str] | None = None,
    sweeps_dir: str | Path = "sweeps",
    *,
    png: bool = True,
    overrides: dict[str, Any] | None = None,
    spec_files: list[str | Path] | None = None,
    options: FigureOptions | None = None,
    images: tuple[str, ...] = IMAGE_FORMATS,
    ui_url: str | None = None,
    require_store: bool = False,
    extras: bool = True,
    seeds: list[int] | None = None,
) -> list[FigureResult]:
    """Build ``figures`` (ids of specs in ``sweeps_dir``) and the specs of ``spec_files``
    (default, when neither is given: every spec in ``sweeps_dir``) from the runs of
    ``tracking_uri`` (None: ``$MLFLOW_TRACKING_URI`` or ``./mlruns/mlflow.db``) under
    ``profile``; write ``<id>.html`` plus one image per format of ``images`` (``png=False``:
    none) to ``out_dir`` (and a builder's extra text files, ``FigureResult.texts``: a table
    figure's ``<id>.csv`` / ``<id>.tex``), and merge the figures into its ``index.html``. A figure drawn as
    several parts (Fig. 2a: loss, accuracy) writes ``<id>-<part>.*``. Beside each (``extras``,
    the default): ``<stem>.csv`` (its curves), ``<id>-parcoords.html`` and ``<id>-runs.csv``
    (its runs). ``overrides`` = the ``--set`` overrides the sweep ran with: the figure's files
    and index entry are then named :func:`override_stem` (``<id>--<key>-<value>``; the
    result's ``figure_id`` stays ``<id>``), beside the figure as configured, which is left as
    it is; ``options`` = band, baseline, metrics. A figure
    without runs is listed as "no runs"; image failures only warn. A figure whose builder fails
    draws nothing and keeps the previous build's files (listed in the index as its files). A
    local store that does not exist draws every figure without runs (with a warning), or with
    ``require_store`` raises ``StoreMissingError``; nothing creates it. ``options.metrics``
    must be logged by the figures' runs (:func:`check_metrics`). ``seeds`` (``--seeds``): the
    figures' runs of these seeds instead of the profile's (more seeds of the same configs,
    e.g. after ``sweep --until-decided``; the claims are judged over them). Every file is written
    atomically (:mod:`fedsweep.core.atomic`); a write that fails raises ``OutputWriteError`` and
    leaves the previous file."""
    from fedsweep.tracking.connect import StoreMissingError, get_client
    from fedsweep.tracking.store import ui_base, ui_open_hint
    from fedsweep.tracking.uri import missing_store_message, resolve_tracking_uri

    options = options or FigureOptions()
    images = tuple(dict.fromkeys(images)) if png else ()
    check_options(profile, options, images)
    extra = [load_spec(p) for p in spec_files or []]
    # only --spec files: the folder's specs are not needed (a broken one there must not stop it)
    specs = load_specs(sweeps_dir, figures) if figures or not extra else {}
    ids = select(specs, figures, extra)
    specs.update({s.figure: s for s in extra})
    if seeds:
        specs = {fid: spec.with_seeds(profile, seeds) for fid, spec in specs.items()}
    check_baseline(options.diff_from, [specs[f] for f in ids])
    # a bad --set key/value fails here, before MLflow, naming the field
    plans = {fid: figure_plan(specs[fid], profile, extra=overrides) for fid in ids}
    uri = resolve_tracking_uri(tracking_uri)
    if _missing_sqlite(uri):
        if require_store:  # the CLI: a mistyped store is an error, not "0 runs" figures
            raise StoreMissingError(missing_store_message(uri))
        warnings.warn(f"no MLflow store at {uri}: every figure has no runs", stacklevel=2)
        client, index = None, RunIndex()
    else:
        client = get_client(uri, create=False)
        index = RunIndex.load(client)
    check_metrics(options.metrics, [specs[f] for f in ids], profile, index, overrides)
    try:
        out = output_folder(out_dir)
    except OutputFolderError as err:
        raise FigureSelectionError(str(err)) from None
    atomic.remove_stale_parts(out)  # left by a build killed mid-write
    results: list[FigureResult] = []
    pages: dict[int, tuple[Any, str]] = {}  # id(result) -> its runs page and runs CSV
    for fid in ids:
        ctx = BuildContext(
            client,
            specs[fid],
            profile,
            index,
            dict(overrides or {}),
            options,
            plan=plans[fid],
        )
        result = _build_one(fid, ctx)
        result.experiment_url = experiment_url(client, fid, ui_base(uri, ui_url))
        if result.experiment_url:  # a link to a UI nothing says runs: how to start it
            result.experiment_hint = ui_open_hint(uri, ui_url)
        results.append(result)
        if extras and not result.error and result.runs:
            page = _runs_page(result, ctx)
            if page is not None:
                pages[id(result)] = page
    index.save()  # the drawn runs' provenance verdicts, for the next build
    # every file is written to a temporary name and renamed into place (fedsweep.core.atomic), and
    # a previous build's files are removed only once the new ones are written: a build killed
    # halfway leaves every file either as it was or complete, never truncated or empty
    jobs = []
    bases = {id(r): override_stem(r.figure_id, overrides) for r in results}  # --set: own files
    for r in results:
        base = bases[id(r)]
        if r.error:  # draw nothing over the previous build's figure: keep its files
            _keep_old_files(out, r, base)
            continue
        runs_page = pages.get(id(r))
        for stem, fig in _stems(r, base):
            mark_coinciding(fig)
            html = out / f"{stem}.html"
            links = [("all figures (index.html)", "index.html")]
            table = curves_csv(fig) if extras else None
            if table is not None:
                name = _curves_name(r, base, stem)
                links.append((f"curves as CSV ({name})", name))
            if runs_page is not None:
                links.append(("runs (parallel coordinates)", f"{base}-parcoords.html"))
            if r.experiment_url:
                label = f"MLflow experiment {r.figure_id}"
                if r.experiment_hint:  # no UI was known to serve the store: say how
                    label += f" (start it with: {r.experiment_hint})"
                links.append((label, r.experiment_url))
            write_html(fig, html, f"{r.title} ({stem})", links, reload_s=options.reload_s)
            r.files.append(html)
            r.html = r.html or html
            jobs += [PngJob(fig, out / f"{stem}.{fmt}") for fmt in images]
            if table is not None:
                r.files.append(atomic.write_text(out / name, table))
        if runs_page is not None:
            fig, table = runs_page
            links = [
                ("all figures (index.html)", "index.html"),
                (f"the runs as CSV ({base}-runs.csv)", f"{base}-runs.csv"),
            ]
            page = out / f"{base}-parcoords.html"
            write_html(fig, page, f"{r.title}: runs ({base})", links)
            r.files.append(page)
            r.files.append(atomic.write_text(out / f"{base}-runs.csv", table))
    for r in results:
        if r.figure is None:
            continue
        for suffix, text in r.texts.items():
            path = atomic.write_text(out / f"{bases[id(r)]}.{suffix}", text)
            r.files.append(path)
    written = write_pngs(jobs) if jobs else {}
    for r in results:
        for stem, _ in _stems(r, bases[id(r)]):
            for fmt in images:
                path = out / f"{stem}.{fmt}"
                if written.get(path):
                    r.files.append(path)
                    if fmt == "png" and r.png is None:
                        r.png = path
    for r in results:
        if not r.error:
            _remove_old_files(out, bases[id(r)], keep={p.name for p in r.files})
    write_index(results, out, uri, overrides=overrides, reload_s=options.reload_s)
    return results


def _stems(r: FigureResult, base: str) -> list[tuple[str, Any]]:
    """``r.stems()`` with the figure id replaced by ``base`` (:func:`override_stem`)."""
    return [(base + stem[len(r.figure_id) :], fig) for stem, fig in r.stems()]


def _curves_name(r: FigureResult, base: str, stem: str) -> str:
    """``<stem>.csv``, or ``<stem>-curves.csv`` where the figure's own table (a table figure's
    ``FigureResult.texts["csv"]``) has that name."""
    if "csv" in r.texts and stem == base:
        return f"{stem}-curves.csv"
    return f"{stem}.csv"


def _runs_page(result: FigureResult, ctx: BuildContext) -> tuple[Any, str] | None:
    """``result``'s parallel-coordinates figure (:mod:`dashboards.parcoords`) and runs CSV,
    from its runs (resolved again by config hash: the builders keep no run list); None without
    runs. A failure only warns (None): the figure is still written."""
    from dashboards import parcoords
    from fedsweep.judge.store import load_metrics, resolve_runs

    try:
        res = resolve_runs(
            ctx.spec, ctx.profile, ctx.index, ctx.overrides, ctx.client, plan=ctx.plan
        )
        if not res.found or ctx.client is None:
            return None
        logged = set().union(*(tr.run.metrics for tr in res.found))
        keys = [k for k in parcoords.METRIC_KEYS if k in logged]
        table = parcoords.run_table(res.found, load_metrics(ctx.client, res.found, keys))
        sets = ", ".join(f"{k}={v}" for k, v in ctx.overrides.items())
        sub = parcoords.subtitle_text(table) + (f" · runs with --set {sets}" if sets else "")
        title = f"{ctx.spec.title}: its runs"
        fig = parcoords.parcoords_figure(table, title, sub)
    except Exception as err:  # noqa: BLE001 - the runs page must never stop the figure
        warnings.warn(
            f"{result.figure_id}: runs page not written ({type(err).__name__}: {err})",
            FigureBuildWarning,
            stacklevel=3,
        )
        return None
    return fig, table.to_csv(index=False)


def _old_files(out: Path, figure_id: str) -> set[str]:
    """The file names a previous build of ``figure_id`` listed in its index entry (and the
    single-file names)."""
    names = {f"{figure_id}.{kind}" for kind in ("html", *IMAGE_FORMATS, *TEXT_FORMATS)}
    names |= {f"{figure_id}{suffix}" for suffix in EXTRA_FILES}
    entry = out / f"{figure_id}.json"
    if entry.is_file():
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
            if data.get(ENTRY_KEY):
                names |= {n for files in data.get("files", {}).values() for n in files}
        except (OSError, ValueError, AttributeError):
            pass
    return {n for n in names if "/" not in n and "\\" not in n}


def _remove_old_files(out: Path, figure_id: str, keep: set[str] = frozenset()) -> None:
    """Delete the files of a previous build of ``figure_id`` that this build did not write
    again (``keep``), so no stale picture stays beside new HTML."""
    for name in _old_files(out, figure_id) - set(keep):
        (out / name).unlink(missing_ok=True)


def _keep_old_files(out: Path, r: FigureResult, base: str | None = None) -> None:
    """A figure that failed keeps the previous build's files (listed in its index entry as
    ``kept``), and says so; ``base``: its file stem (:func:`override_stem`), default its id."""
    old = _old_files(out, base or r.figure_id)
    r.kept = [out / n for n in sorted(old) if (out / n).is_file()]
    if r.kept:
        r.notes.append(
            "this build failed; the files shown are the previous build's: "
            + ", ".join(p.name for p in r.kept)
        )


def _missing_sqlite(uri: str) -> bool:
    """A local sqlite store whose file does not exist (do not create an empty one)."""
    return uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).is_file()


def judged(result: FigureResult, ctx: BuildContext) -> FigureResult:
    """``result`` with its claims judged (:func:`fedsweep.judge.judge`) from the figure's plan
    and the runs the judge loads itself (:func:`fedsweep.judge.store.load_runs`): the builder
    draws, the judge decides."""
    plan = ctx.plan or figure_plan(ctx.spec, ctx.profile, extra=ctx.overrides)
    runs = load_runs(plan, ctx.client, ctx.index)[0] if ctx.client is not None else None
    result.verdicts = judge(plan, runs)
    result.claims = list(result.verdicts)
    return result


def _build_one(fid: str, ctx: BuildContext) -> FigureResult:
    try:
        return judged(builder_for(fid)(ctx), ctx)
    except Exception as err:  # noqa: BLE001 - one broken figure must not stop the others
        warnings.warn(f"{fid}: {type(err).__name__}: {err}", FigureBuildWarning, stacklevel=3)
        spec = ctx.spec
        if isinstance(err, FigureDataError):  # the runs lack something: the message says what
            text = str(err)
        else:
            text = "".join(traceback.format_exception_only(err)).strip()
        return FigureResult(
            fid,
            spec.title,
            ctx.profile,
            None,
            [],
            [],
            getattr(err, "runs", 0),
            getattr(err, "expected_runs", 0),
            profile_note=spec.profiles[ctx.profile].note,
            error=text,
        )
