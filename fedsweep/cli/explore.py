"""``fedsweep runs`` (alias ``find``) and ``fedsweep compare``: find runs, and draw them.

Runs are chosen by run id, by ``--where KEY=VALUE`` filters, or by config hash, and found with
one MLflow search per hash over every experiment of the store (or the ``--experiment``s).
A filter's key is a config key (``bherd.alpha``: the run's params are its flattened, resolved
config), a tag (``fedsweep.figure``, ``fedsweep.seed``: any key starting with ``fedsweep.`` or
``mlflow.``), or explicit: ``params.KEY``, ``tags.KEY``, ``metrics.KEY`` (``metrics.test_acc>0.8``),
``attributes.KEY``. A config key's value is read as that key's type, so ``train.lr=1e-4`` finds
the runs whose param is ``0.0001``. It becomes MLflow's search syntax, e.g.
``params.`bherd.alpha` = '0.3' and tags.`fedsweep.figure` = 'bherd-fig3a'``.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from fedsweep.cli.common import (
    EXIT_FAILED,
    PluginOption,
    TrackingUriOption,
    UsageError,
    clean_errors,
    complete_figure,
    did_you_mean,
    fail,
)
from fedsweep.tracking.direct import DONE_STATUSES as DONE

OPERATORS = ("!=", ">=", "<=", "=", ">", "<")  # longest first: `a>=1` is not `a>` `=1`
PAGE = 1000

WhereOption = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        "-w",
        metavar="KEY=VALUE",
        help="Filter: a config key (bherd.alpha=0.3, data.partition=case2), a tag "
        "(fedsweep.figure=bherd-fig3a, fedsweep.seed=1), or params./tags./metrics./attributes.KEY; "
        "also != and, for metrics, < <= > >=. Repeatable (all must hold).",
    ),
]
ExperimentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--experiment",
        "-e",
        metavar="NAME",
        help="Only runs of this MLflow experiment (e.g. bherd-fig3a). Repeatable. "
        "Default: every experiment.",
    ),
]
HashOption = Annotated[
    list[str] | None,
    typer.Option(
        "--hash",
        metavar="CONFIG_HASH",
        help="Runs with this config hash (tag fedsweep.config_hash; `fedsweep validate` prints "
        "it; a prefix of 6+ characters works). Repeatable.",
    ),
]
UiUrlOption = Annotated[
    str | None,
    typer.Option(
        "--ui-url",
        metavar="URL",
        help="Base URL of the MLflow UI (default: the tracking server for an http(s) "
        "--tracking-uri, else $FEDSWEEP_UI_URL, else the address of a `fedsweep ui` serving this "
        "store, else http://127.0.0.1:5000).",
    ),
]


# ------------------------------------------------------------------------------ filters
@dataclass(frozen=True)
class Filter:
    """One ``--where``: MLflow entity (params/tags/metrics/attributes), key, operator, value."""

    entity: str
    key: str
    op: str
    value: str

    def clause(self) -> str:
        if self.entity == "metrics":
            return f"metrics.`{self.key}` {self.op} {self.value}"
        return f"{self.entity}.`{self.key}` {self.op} {_quote(self.value)}"


def _quote(value: str) -> str:
    if "'" not in value:
        return f"'{value}'"
    if '"' not in value:
        return f'"{value}"'
    raise UsageError(f"filter value {value!r} holds both quote characters; MLflow cannot match it")


def _param_value(key: str, raw: str) -> str:
    """A config key's value as ``fedsweep run`` logs it: the YAML value read as the key's type
    (``1e-4`` -> ``0.0001``, ``1`` -> ``1.0`` for a float key), ``null`` for None."""
    from pydantic import TypeAdapter, ValidationError

    from fedsweep.config.load import allowed_values, closest, schema_field
    from fedsweep.config.yamlio import YamlFileError, loads

    annotation = schema_field(key).annotation
    try:
        value = loads(raw) if raw.strip() else None
        value = TypeAdapter(annotation).validate_python(value)
    except (YamlFileError, ValidationError) as err:
        allowed = allowed_values(key)
        hint = ""
        if allowed:
            best = closest(raw, [str(a) for a in allowed])
            hint = f"; allowed: {', '.join(map(str, allowed))}"
            hint += f" (did you mean {best!r}?)" if best else ""
        elif isinstance(err, ValidationError):
            hint = f": {err.errors()[0]['msg']}"
        raise UsageError(f"--where {key}={raw}: not a valid value for `{key}`{hint}") from None
    value = TypeAdapter(annotation).dump_python(value, mode="json")
    return "null" if value is None else str(value)


def parse_where(item: str) -> Filter:
    """``bherd.alpha=0.3`` -> Filter("params", "bherd.alpha", "=", "0.3"); raises UsageError
    with the allowed keys/values (and the nearest one) for a bad filter."""
    from fedsweep.config.load import schema_field, schema_keys, suggest_key

    match = re.match(r"^\s*([^!<>=\s]+)\s*(!=|>=|<=|=|>|<)\s*(.*)$", item)
    if not match:
        raise UsageError(
            f"--where {item!r} is not KEY=VALUE (e.g. bherd.alpha=0.3, fedsweep.figure=bherd-fig3a)"
        )
    key, op, value = match.group(1), match.group(2), match.group(3).strip()
    entity, _, rest = key.partition(".")
    if entity in ("params", "tags", "metrics", "attributes") and rest:
        key = rest
    elif entity in ("fedsweep", "mlflow"):
        entity = "tags"
    else:
        entity = "params"
        if schema_field(key) is None:
            if key in schema_keys():
                raise UsageError(f"--where {item}: `{key}` is a config section, not a value")
            raise UsageError(
                f"--where {item}: unknown config key `{key}`{suggest_key(key)} "
                "(tags start with fedsweep., e.g. fedsweep.figure; or write params./tags.KEY)"
            )
    if entity == "metrics":
        try:
            float(value)
        except ValueError:
            raise UsageError(f"--where {item}: a metric compares with a number") from None
    elif op not in ("=", "!="):
        raise UsageError(
            f"--where {item}: {entity} compare with = or != only (< > are for metrics)"
        )
    if entity == "params" and schema_field(key) is not None:
        value = _param_value(key, value)
    return Filter(entity, key, op, value)


def hash_filter(value: str) -> Filter:
    value = value.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{6,16}", value):
        raise UsageError(
            f"--hash {value!r}: a config hash is 16 hex digits (a prefix of 6 or more works); "
            "`fedsweep validate CONFIG` prints it"
        )
    if len(value) == 16:
        return Filter("tags", "fedsweep.config_hash", "=", value)
    return Filter("tags", "fedsweep.config_hash", "LIKE", value + "%")


# -------------------------------------------------------------------------------- store
def open_store(tracking_uri: str | None):
    """The MLflow client of an existing store (a missing local store is a usage error, not a
    new empty database: ``StoreMissingError``, exit 2)."""
    from fedsweep.tracking.connect import get_client
    from fedsweep.tracking.uri import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    return uri, get_client(uri, create=False)


def experiment_ids(client, names: list[str] | None) -> dict[str, str]:
    """id -> name of the chosen experiments (all by default)."""
    from fedsweep.config.load import closest

    every = {e.experiment_id: e.name for e in client.search_experiments()}
    if not names:
        return every
    by_name = {n: i for i, n in every.items()}
    out = {}
    for name in names:
        if name not in by_name:
            best = closest(name, list(by_name))
            hint = f" (did you mean {best!r}?)" if best else ""
            raise UsageError(
                f"--experiment {name!r}: no such experiment{hint}; "
                f"experiments: {', '.join(sorted(by_name)) or 'none'}"
            )
        out[by_name[name]] = name
    return out


def search(client, exp_ids: list[str], filters: list[Filter], limit: int | None) -> list:
    """Runs matching every filter, newest first (paged; at most ``limit``)."""
    from mlflow.exceptions import MlflowException

    if not exp_ids:
        return []
    text = " and ".join(f.clause() for f in filters)
    runs, token = [], None
    while limit is None or len(runs) < limit:
        size = PAGE if limit is None else min(PAGE, limit - len(runs))
        try:
            page = client.search_runs(
                exp_ids,
                filter_string=text,
                max_results=size,
                order_by=["attributes.start_time DESC"],
                page_token=token,
            )
        except MlflowException as err:
            raise UsageError(f"bad filter {text!r}: {err.message}") from None
        runs += list(page)
        token = page.token
        if not token:
            break
    sections = _component_sections(filters)
    if sections:  # a key of a section the run does not use is no property of the run
        runs = [r for r in runs if sections <= set(run_sections(r))]
    return runs


def _component_sections(filters: list[Filter]) -> set[str]:
    """The component sections (``bherd``, ``fedveca``, ...) the config-key filters name."""
    from fedsweep.components.compose import GENERAL_SECTIONS, component_sections

    owned = {s for sections in component_sections().values() for s in sections}
    named = {f.key.split(".")[0] for f in filters if f.entity == "params" and "." in f.key}
    return {s for s in named if s in owned and s not in GENERAL_SECTIONS}


def run_sections(run) -> tuple[str, ...]:
    """The config sections a run's components read, from its logged choices (``selector``,
    ``algorithm``, ...). Every run logs every section's values, used or not; a filter on
    ``bherd.alpha`` must not match a FedAvg run (the config hash drops unused sections too:
    ``fedsweep.config.hashing.unused_sections``)."""
    from fedsweep.components.compose import SLOTS, config_sections
    from fedsweep.config.yamlio import YamlFileError, loads

    choices = {}
    for slot in SLOTS:
        if slot in run.data.params:
            try:
                choices[slot] = loads(run.data.params[slot])
            except (YamlFileError, RecursionError):
                choices[slot] = run.data.params[slot]
    return config_sections(choices)


def status_of(run) -> str:
    """fedsweep's status tag (finished/diverged/failed/killed/running), else MLflow's."""
    return run.data.tags.get("fedsweep.status") or run.info.status.lower()


def is_sweep_parent(run) -> bool:
    return run.data.tags.get("fedsweep.kind") == "sweep"


def run_url(base: str, run) -> str:
    """The run's page in the MLflow UI at ``base``, in the training-runs view."""
    from fedsweep.tracking.store import ui_url

    return ui_url(base, run.info.experiment_id, run.info.run_id)


def run_config(client, run):
    """The run's RunConfig: from its params (the flattened config), checked against its
    config-hash tag; else from its ``config.yaml`` artifact; None if neither works."""
    import tempfile

    from fedsweep.config.load import ConfigError, build_config
    from fedsweep.config.yamlio import YamlFileError, loads, read_yaml
    from fedsweep.specs.load import HASH_EXCLUDED, config_hash, legacy_config_hash

    tag = run.data.tags.get("fedsweep.config_hash")
    tree: dict[str, Any] = {}
    for key, text in run.data.params.items():
        if any(key == e or key.startswith(e + ".") for e in HASH_EXCLUDED):
            continue
        try:
            value = loads(text)  # within the loader's bounds (a run's params are store data)
        except (YamlFileError, RecursionError):
            value = text
        node = tree
        *head, last = key.split(".")
        for part in head:
            node = node.setdefault(part, {})
        node[last] = value
    try:
        cfg = build_config(tree, source=run.info.run_id, unused="keep")
        if tag is None or tag in (config_hash(cfg), legacy_config_hash(cfg)):
            return cfg
    except (ConfigError, TypeError, AttributeError):
        pass
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run.info.run_id, "config.yaml", tmp)
            tree = read_yaml(path, "logged config")
            return build_config(tree, source=run.info.run_id, unused="keep")
    except Exception:  # noqa: BLE001 - no artifact, or a config this code cannot read
        return None


def parse_filters(where: list[str] | None, hashes: list[str] | None):
    """The ``--where`` and ``--hash`` filters, checked (before any store is opened)."""
    return [parse_where(w) for w in where or []], [hash_filter(h) for h in hashes or []]


def _select(
    client, exp_ids: list[str], filters: list[Filter], by_hash: list[Filter], limit: int | None
) -> list:
    """Runs matching every filter and any of the hashes (one search per hash)."""
    if not by_hash:
        return search(client, exp_ids, filters, limit)
    runs = []
    for hf in by_hash:
        runs += search(client, exp_ids, [*filters, hf], limit)
    return runs


def _figure_runs(
    client, exp_ids: list[str], figure: str, filters: list[Filter], by_hash, limit: int | None
) -> list:
    """The runs a figure uses: its own (tag ``fedsweep.figure``) and those its sweeps reused
    from other figures (membership tag ``fedsweep.used_by.<figure>``), newest first. MLflow's
    search has no OR: two searches, merged."""
    from fedsweep.sweep.store_index import used_by_tag

    own = Filter("tags", "fedsweep.figure", "=", figure)
    used = Filter("tags", used_by_tag(figure), "LIKE", "%")
    found = {}
    for extra in (own, used):
        for run in _select(client, exp_ids, [*filters, extra], by_hash, limit):
            found.setdefault(run.info.run_id, run)
    return sorted(found.values(), key=lambda r: -(r.info.start_time or 0))


def known_figures(client) -> list[str]:
    """Figure ids ``--figure`` may name: the paper figures' (``dashboards.BUILDERS``), the
    specs' in ./sweeps (a spec's id is its file name) and the store's experiments (a sweep logs
    into the experiment named by its figure id, a spec of your own included)."""
    from dashboards.registry import BUILDERS

    ids = set(BUILDERS) | {e.name for e in client.search_experiments()}
    folder = Path("sweeps")
    if folder.is_dir():
        ids |= {p.stem for p in folder.glob("*.yaml")}
    ids.discard("Default")
    return sorted(ids)


def check_figure_id(client, figure: str) -> None:
    """``runs --figure ID`` found nothing: a figure id nothing knows is a usage error (a typo),
    not "no runs match"."""
    known = known_figures(client)
    if figure not in known:
        raise UsageError(
            f"--figure {figure!r}: no such figure{did_you_mean(figure, known)}; "
            f"figures: {', '.join(known)}"
        )


def refuse_figure_typo(figure: str) -> None:
    """``runs --figure ID``: an id a couple of letters off a figure id known here (the specs of
    ./sweeps, ./studies and fedsweep's own) is a typo, refused before any store is opened (an
    unreachable tracking server made it wait for minutes first). Any other unknown id may be a
    figure only the store knows (a spec swept elsewhere): the store is asked
    (:func:`check_figure_id`)."""
    from fedsweep.core.suggest import typo_of
    from fedsweep.specs.names import local_figure_ids

    known = local_figure_ids()
    if figure in known:
        return
    near = typo_of(figure, known)
    if near is not None:
        raise UsageError(
            f"--figure {figure!r}: no such figure (did you mean {near!r}?); figures here: "
            f"{', '.join(known)} (a figure only your store knows: -e {figure} lists its "
            "experiment's runs)"
        )


def figure_id(name: str) -> str:
    """``--figure``'s value as a figure id: an id as given, a spec file's path as the figure it
    declares (``sweeps/bherd-fig3a.yaml`` -> ``bherd-fig3a``); an unknown path is a usage
    error with the nearest file."""
    from fedsweep.cli.common import figure_names
    from fedsweep.specs.load import load_spec

    if not name.strip():  # not "every figure": a filter that filters nothing is a mistake
        raise UsageError(
            f"--figure {name!r}: an empty name names no figure (allowed: a figure id, e.g. "
            "bherd-fig3a, or a spec file's path; leave --figure out for every run)"
        )
    ids, files = figure_names([name], Path("sweeps"))
    return ids[0] if ids else load_spec(files[0]).figure


#: ``--figure`` of ``runs`` and ``compare``
FigureOption = Annotated[
    str | None,
    typer.Option(
        metavar="ID|PATH",
        help="Only runs this figure uses (a figure id, or its spec file): its own (tag "
        "fedsweep.figure) and those it reused from other figures' sweeps (tag "
        "fedsweep.used_by.ID).",
        autocompletion=complete_figure,
    ),
]


# ---------------------------------------------------------------------------- fedsweep runs
def runs(
    where: WhereOption = None,
    experiment: ExperimentOption = None,
    figure: FigureOption = None,
    status: Annotated[
        str | None,
        typer.Option(
            metavar="STATUS",
            help="Only runs with this status: finished, diverged, running, failed, killed "
            "(or partial for a sweep).",
        ),
    ] = None,
    config_hash: HashOption = None,
    limit: Annotated[int, typer.Option(metavar="N", min=1, help="At most N runs.")] = 50,
    ui_url: UiUrlOption = None,
    tracking_uri: TrackingUriOption = None,
) -> None:
    """List runs matching filters, with their MLflow UI links (alias: find).

    One line per run, newest first: name, status, final test accuracy, config hash, experiment
    and the run's page in the MLflow UI (`fedsweep ui` serves it). E.g. Fig. 3a, α=0.3, seed 1:
    fedsweep runs --figure bherd-fig3a --where bherd.alpha=0.3 --where fedsweep.seed=1"""
    statuses = ("finished", "diverged", "running", "failed", "killed", "partial")
    with clean_errors():
        if status is not None and status not in statuses:
            from fedsweep.config.load import closest

            best = closest(status, statuses)
            hint = f" (did you mean {best!r}?)" if best else ""
            raise UsageError(f"--status {status!r}{hint}; allowed: {', '.join(statuses)}")
        wheres = list(where or [])
        if status:
            wheres.append(f"fedsweep.status={status}")
        filters, by_hash = parse_filters(wheres, config_hash)
        # a bad name ('' included) fails before the store
        figure = figure_id(figure) if figure is not None else None
        if figure is not None:
            refuse_figure_typo(figure)  # before the store: an unreachable one waits minutes
        uri, client = open_store(tracking_uri)
        exps = experiment_ids(client, experiment)
        if figure:
            found = _figure_runs(client, list(exps), figure, filters, by_hash, limit)
            if not found:
                check_figure_id(client, figure)
        else:
            found = _select(client, list(exps), filters, by_hash, limit)
    from fedsweep.tracking.store import ui_base

    seen, rows = set(), []
    for run in found:
        if run.info.run_id in seen:
            continue
        seen.add(run.info.run_id)
        acc = run.data.metrics.get("test_acc")
        name = run.info.run_name or run.info.run_id[:8]
        if is_sweep_parent(run):
            name = f"[sweep] {name}"
        rows.append(
            (
                name,
                status_of(run),
                "-" if acc is None else f"{acc:.4f}",
                run.data.tags.get("fedsweep.config_hash", "-"),
                exps.get(run.info.experiment_id, run.info.experiment_id),
                run_url(ui_base(uri, ui_url), run),
            )
        )
    rows = rows[:limit]
    if not rows:
        typer.echo("no runs match")
        return
    head = ("run", "status", "test_acc", "config hash", "experiment", "url")
    width = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    for row in [head, *rows]:
        cells = [row[i].ljust(width[i]) for i in range(5)]
        typer.echo("  ".join(cells) + "  " + row[5])
    more = " (limit reached: --limit N for more)" if len(rows) >= limit else ""
    typer.echo(f"{len(rows)} run(s){more}")


# ------------------------------------------------------------------------- fedsweep compare
def compare(
    run_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="RUN_ID", help="MLflow run ids to draw."),
    ] = None,
    run: Annotated[
        list[str] | None,
        typer.Option("--run", metavar="RUN_ID", help="A run id to draw. Repeatable."),
    ] = None,
    where: WhereOption = None,
    figure: FigureOption = None,
    config_hash: HashOption = None,
    experiment: ExperimentOption = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            "-m",
            metavar="NAME",
            help="Metric to draw (default: test_loss and test_acc). Repeatable.",
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            metavar="DIR",
            help="Output folder (NAME.html, NAME.png, NAME.csv, NAME-curves.csv).",
        ),
    ] = Path("figures/compare"),
    name: Annotated[
        str, typer.Option(metavar="NAME", help="File name (without suffix) of the outputs.")
    ] = "compare",
    title: Annotated[str | None, typer.Option(metavar="TEXT", help="Figure title.")] = None,
    include_running: Annotated[
        bool,
        typer.Option(
            "--include-running", help="Also draw runs that are not finished/diverged yet."
        ),
    ] = False,
    png: Annotated[
        bool, typer.Option("--png/--no-png", help="Also write a PNG (needs Chromium).")
    ] = True,
    tracking_uri: TrackingUriOption = None,
    plugin: PluginOption = None,
) -> None:
    """Draw chosen runs grouped by config (mean ± std over seeds) and tabulate their metrics.

    Choose runs by id, by --where filters or by --hash. Runs of one config that differ only in
    the seed form one group; its label says what differs between the groups (e.g. α=0.3 vs
    α=0.5). Writes NAME.html (offline), NAME.png, NAME.csv (the table) and NAME-curves.csv
    (every plotted point) to --out, and prints per group:
    n seeds, final test accuracy (mean ± std), best test accuracy (round), final test loss,
    rounds. Only finished/diverged runs unless --include-running."""
    from dashboards.compare import (
        common_note,
        compare_figure,
        group_labels,
        long_frame,
        summary_table,
    )

    metrics = list(dict.fromkeys(metric or ["test_loss", "test_acc"]))
    ids = list(dict.fromkeys([*(run_ids or []), *(run or [])]))
    with clean_errors():
        from fedsweep.plugins import load_plugins

        load_plugins(plugin)  # parts the runs' configs name (a tau rule of your own)
        if not (ids or where or config_hash or figure is not None):
            raise UsageError(
                "choose runs to compare: RUN_ID..., --figure ID, --where KEY=VALUE (e.g. "
                "--figure bherd-fig3a --where bherd.alpha=0.3) or --hash HASH"
            )
        if not re.fullmatch(r"[\w.\-]+", name):
            raise UsageError(f"--name {name!r}: use letters, digits, '.', '-' and '_'")
        filters, by_hash = parse_filters(where, config_hash)
        # a bad name ('' included) fails before the store
        figure = figure_id(figure) if figure is not None else None
        if figure is not None:
            refuse_figure_typo(figure)  # before the store: an unreachable one waits minutes
        uri, client = open_store(tracking_uri)
        exps = experiment_ids(client, experiment)
        chosen = [_get_run(client, rid) for rid in ids]
        if figure:
            chosen += _figure_runs(client, list(exps), figure, filters, by_hash, None)
            if not chosen:
                check_figure_id(client, figure)
        elif filters or by_hash:
            chosen += _select(client, list(exps), filters, by_hash, None)
        runs_, seen, skipped = [], set(), {}
        for r in chosen:
            if r.info.run_id in seen or is_sweep_parent(r):
                continue
            seen.add(r.info.run_id)
            st = status_of(r)
            if st not in DONE and not include_running:
                skipped[st] = skipped.get(st, 0) + 1
                continue
            runs_.append(r)
        if not runs_:
            why = f" ({_counts(skipped)} not done; --include-running draws them)" if skipped else ""
            raise UsageError(f"no finished or diverged run matches{why}")
        present = {k for r in runs_ for k in r.data.metrics}
        for m in metrics:
            if m not in present:
                from fedsweep.config.load import closest

                best = closest(m, sorted(present))
                hint = f" (did you mean {best!r}?)" if best else ""
                raise UsageError(f"--metric {m!r}: none of the chosen runs logged it{hint}")
        from dashboards.export import OutputFolderError, output_folder

        try:
            output_folder(out)
        except OutputFolderError as err:
            raise UsageError(str(err)) from None
    groups, rows, dropped = _group(client, runs_, metrics)
    labels = group_labels(
        {g.key: flat for g, flat in groups.values()}, {g.key: g.label for g, _ in groups.values()}
    )
    for g, _ in groups.values():
        g.label = labels[g.key]
    ordered = sorted((g for g, _ in groups.values()), key=lambda g: g.label)
    long = long_frame(rows)
    table = summary_table(long, ordered, metrics)
    n_runs = sum(len(g.run_ids) for g in ordered)
    heading = title or f"Compare: {len(ordered)} config(s), {n_runs} run(s)"
    common = common_note({g.key: flat for g, flat in groups.values()})
    sub = " · ".join(x for x in (common, "mean ± 1 std over seeds", f"store {uri}") if x)
    fig = compare_figure(long, ordered, metrics, heading, sub)
    from fedsweep.core.atomic import OutputWriteError

    try:
        _write(fig, table, out, name, heading, png)
    except OutputWriteError as err:  # a full disk, a file-size limit: the old files stay
        fail(str(err), EXIT_FAILED)
    _print_table(table, metrics)
    if dropped:
        typer.echo(
            f"note: {dropped} repeated run(s) of the same config and seed left out (latest kept)"
        )
    if skipped:
        typer.echo(f"note: {_counts(skipped)} run(s) not done left out (--include-running)")


def _counts(by: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(by.items()))


def _get_run(client, run_id: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise UsageError(f"no run with id {run_id!r} in this store") from None


def _group(client, runs_: list, metrics: list[str]):
    """Group runs by config without the seed; one run per (config, seed), the latest. Returns
    ({key: (Group, flat config)}, metric rows, repeated runs left out)."""
    from dashboards.compare import Group
    from fedsweep.config.load import flatten
    from fedsweep.specs.load import config_hash

    groups: dict[str, tuple[Group, dict]] = {}
    taken: set[tuple[str, int]] = set()
    rows, dropped = [], 0
    for r in sorted(runs_, key=lambda r: -(r.info.start_time or 0)):
        cfg = run_config(client, r)
        if cfg is None:
            key, seed, flat = f"run-{r.info.run_id}", 0, {}
        else:
            key = config_hash(cfg.model_copy(update={"seed": 0}))
            seed, flat = cfg.seed, flatten(cfg.model_dump(mode="json"))
        if (key, seed) in taken:
            dropped += 1
            continue
        taken.add((key, seed))
        if key not in groups:
            groups[key] = (Group(key, r.info.run_name or r.info.run_id[:8]), flat)
        g = groups[key][0]
        g.run_ids.append(r.info.run_id)
        g.seeds.append(seed)
        g.statuses.append(status_of(r))
        for m in metrics:
            for point in client.get_metric_history(r.info.run_id, m):
                rows.append((key, seed, r.info.run_id, point.step, m, point.value))
    return groups, rows, dropped


def _write(fig, table, out: Path, name: str, title: str, png: bool) -> None:
    from dashboards.export import PngJob, curves_csv, write_html, write_pngs
    from fedsweep.core import atomic

    # every file is written to a temporary name and renamed into place (fedsweep.core.atomic): a
    # compare killed halfway leaves the previous files as they were
    atomic.remove_stale_parts(out)
    html = write_html(fig, out / f"{name}.html", title)
    atomic.write_text(out / f"{name}.csv", table.to_csv(index=False))
    curves = curves_csv(fig)  # every plotted curve, point by point (the summary is NAME.csv)
    if curves:
        atomic.write_text(out / f"{name}-curves.csv", curves)
    typer.echo(f"figure: {html.resolve()}")
    if png:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            done = write_pngs([PngJob(fig, out / f"{name}.png")])
        for w in caught:
            typer.echo(f"note: {w.message}")
        for path, ok in done.items():
            if ok:
                typer.echo(f"png: {path.resolve()}")


def _pm(mean: float, std: float) -> str:
    return f"{mean:.4f} ± {std:.4f}"


def _print_table(table, metrics: list[str]) -> None:
    """label | n | final <acc metrics> mean ± std | best <acc> (round) | final <others> | rounds."""
    first = sorted(metrics, key=lambda m: 0 if "acc" in m else 1)
    head = ["group", "n"]
    for m in first:
        head.append(f"final {m}")
        if "acc" in m:
            head.append(f"best {m}")
    head.append("rounds")
    rows = []
    for _, r in table.iterrows():
        cells = [str(r["label"]), str(r["n"])]
        for m in first:
            cells.append(_pm(r[f"final_{m}_mean"], r[f"final_{m}_std"]))
            if "acc" in m:
                cells.append(f"{r[f'best_{m}']:.4f} (t={r[f'best_{m}_round']})")
        lo, hi = r["rounds_min"], r["rounds_max"]
        cells.append(str(hi) if lo == hi else f"{lo}–{hi}")
        if r["diverged"]:
            cells[-1] += f" ({r['diverged']} diverged)"
        rows.append(cells)
    width = [max(len(c[i]) for c in [head, *rows]) for i in range(len(head))]
    for cells in [head, *rows]:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(cells, width, strict=True)).rstrip())
