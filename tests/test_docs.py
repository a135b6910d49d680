"""The README and the docs site (issue 33, step 6): a README a newcomer reads in a minute, with
no dates or commit hashes in it; reference pages generated from the code that cover every config
key, command and option; and a site that builds with ``mkdocs build --strict``."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATOR = DOCS / "gen_reference.py"


@pytest.fixture(scope="module")
def gen():
    """docs/gen_reference.py, a plain script, loaded as a module."""
    spec = importlib.util.spec_from_file_location("gen_reference", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def config_md(gen) -> str:
    return gen.config_reference()


@pytest.fixture(scope="module")
def cli_md(gen) -> str:
    return gen.cli_reference()


# ------------------------------------------------------------------------------ README
def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"


#: a word of 7-40 hex digits: a commit hash (short or full)
HEX_WORD = re.compile(r"(?<![0-9A-Za-z_])[0-9a-fA-F]{7,40}(?![0-9A-Za-z_])")
DATE = re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)")


def commit_hashes(text: str) -> list[str]:
    """Hex words with at least one digit and one letter a-f: ``9b48efe``, not ``fedsweep``
    (not hex), ``deadbeef``-like words (no digit) or ``1000000`` (no letter)."""
    return [
        word
        for word in HEX_WORD.findall(text)
        if re.search(r"\d", word) and re.search(r"[a-fA-F]", word)
    ]


def test_hash_and_date_patterns():
    full = "c0ffee00" + "1" * 32
    assert commit_hashes(f"at commit 9b48efe and 155584f; in full {full}.") == [
        "9b48efe",
        "155584f",
        full,
    ]
    assert commit_hashes("fedsweep, deadbeef, 1000000 runs, accede, 5e-4, a1b2c3") == []
    assert commit_hashes("resnet18-f37072fd.pth") == ["f37072fd"]
    assert DATE.findall("measured 2026-11-24, not 12026-11-240") == ["2026-11-24"]


def test_readme_has_no_commit_hashes_or_dates():
    text = README.read_text(encoding="utf-8")
    assert commit_hashes(text) == [], (
        "commit hashes belong in CHANGELOG.md or docs/development/notes/"
    )
    assert DATE.findall(text) == [], "dates belong in CHANGELOG.md or docs/development/notes/"


def test_readme_links_resolve():
    """Every relative link of the README names a file of the repository (GitHub renders them);
    the generated reference pages are not committed, so the README does not link them."""
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert target not in ("docs/reference/config.md", "docs/reference/cli.md"), (
            "the generated pages are not committed: a fresh clone has no such file"
        )
        assert (ROOT / target).is_file(), f"README links to {target}, which does not exist"


# ---------------------------------------------------------------- generated references
def _options(annotation) -> list:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [o for arg in typing.get_args(annotation) for o in _options(arg)]
    return [annotation]


def run_config_leaf_fields() -> dict:
    """Every dotted key of ``RunConfig`` that holds a value -> its field, walked here
    independently of the generator: a field whose type is a pydantic model (possibly optional)
    is a section."""
    from pydantic import BaseModel

    from fedsweep.config.schema import RunConfig

    def walk(model, prefix):
        for name, field in model.model_fields.items():
            models = [
                o
                for o in _options(field.annotation)
                if isinstance(o, type) and issubclass(o, BaseModel)
            ]
            if len(models) == 1:
                yield from walk(models[0], f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}", field

    return dict(walk(RunConfig, ""))


def _rows(config_md: str) -> dict[str, str]:
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `([^`]+)` \|.*$", config_md, re.M)}


def test_config_reference_covers_every_key(config_md):
    keys = list(run_config_leaf_fields())
    assert len(keys) > 20
    rows = _rows(config_md)
    missing = [k for k in keys if k not in rows]
    assert not missing, f"config keys missing from the reference: {missing}"
    extra = sorted(set(rows) - set(keys))
    assert not extra, f"the reference lists keys RunConfig does not have: {extra}"


def test_config_reference_rows(config_md):
    """Allowed values (``Literal``) and bounds (``ge``/``gt``/``le``/``lt``) come from the fields
    themselves, whatever the sections are called."""
    rows = _rows(config_md)
    literals = bounds = 0
    for key, field in run_config_leaf_fields().items():
        for option in _options(field.annotation):
            if typing.get_origin(option) is typing.Literal:
                for value in typing.get_args(option):
                    assert f"`{value}`" in rows[key], (key, value)
                    literals += 1
        for meta in field.metadata:
            for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "&lt;="), ("lt", "&lt;")):
                bound = getattr(meta, attr, None)
                if bound is not None:
                    assert f"{sign} {bound}" in rows[key].replace("<", "&lt;"), (key, attr)
                    bounds += 1
    assert literals and bounds


def cli_commands():
    """``(path, [option strings])`` of every visible command, walked with the click API
    (duck-typed: typer builds its commands on its own copy of click)."""
    import typer

    from fedsweep.cli.main import app

    root = typer.main.get_command(app)

    def walk(command, ctx):
        options = []
        for param in command.get_params(ctx):
            if getattr(param, "hidden", False):
                continue
            if getattr(param, "param_type_name", "") == "argument":
                options.append((param.metavar or param.name).upper())
            else:
                options += list(param.opts) + list(param.secondary_opts)
        yield ctx.command_path, options
        if callable(getattr(command, "list_commands", None)):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is None or getattr(sub, "hidden", False):
                    continue
                yield from walk(sub, sub.context_class(sub, info_name=name, parent=ctx))

    return list(walk(root, root.context_class(root, info_name="fedsweep")))


def _sections(markdown: str) -> dict[str, str]:
    """``## `heading` `` -> the text up to the next such heading."""
    parts = re.split(r"^## `([^`]+)`\s*$", markdown, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_cli_reference_covers_every_command_and_option(cli_md):
    commands = cli_commands()
    assert len(commands) > 3
    sections = _sections(cli_md)
    for path, options in commands:
        assert path in sections, f"{path} is missing from the CLI reference"
        for option in options:
            assert f"`{option}" in sections[path], f"{path} {option} is missing"
    visible = {path for path, _ in commands}
    assert set(sections) == visible, "the reference lists only visible commands"


# --------------------------------------------------------------------------- the site
def test_nav_keeps_the_cited_documents():
    """docs/algorithms.md and docs/figures.md stay where code and tests cite them."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from pages(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from pages(value)

    listed = set(pages(nav))
    assert {"algorithms.md", "figures.md", "reference/config.md", "reference/cli.md"} <= listed
    assert (DOCS / "algorithms.md").is_file() and (DOCS / "figures.md").is_file()
    for page in listed:
        generated = page in ("reference/config.md", "reference/cli.md")
        assert generated or (DOCS / page).is_file(), f"nav names {page}, which does not exist"


def test_mkdocs_build_strict(tmp_path, gen):
    """The whole site, with freshly generated references, builds with no warning."""
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]')")
    docs = tmp_path / "docs"
    generated = {DOCS / "reference" / "config.md", DOCS / "reference" / "cli.md"}
    shutil.copytree(
        DOCS,
        docs,
        ignore=lambda folder, names: [
            n for n in names if Path(folder) / n in generated or n == "__pycache__"
        ],
    )
    gen.write(docs / "reference")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config.update(docs_dir=str(docs), site_dir=str(tmp_path / "site"))
    config_file = tmp_path / "mkdocs.yml"
    config_file.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    site = tmp_path / "site"
    assert (site / "index.html").is_file()
    assert (site / "reference" / "config.html").is_file()
    assert (site / "algorithms.html").is_file()
