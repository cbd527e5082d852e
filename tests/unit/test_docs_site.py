"""The documentation site builds with ``mkdocs build --strict``, offline, and the README teaches.

- The site (mkdocs.yml, docs/) builds in strict mode with the network unreachable: any warning,
  a broken link or anchor, a nav entry naming a missing page, fails the build and this test;
  a broken link planted in a copy of the site is shown to fail it.
- The built pages fetch nothing from the internet (no web fonts, no CDN scripts).
- The API reference page names every route and schema of api_schema/openapi.json.
- The README stays short (at most 250 lines), states the three commands CI runs, links only
  to pages that exist, and every `nevis` command in its shell blocks exists (`--help` answers).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
MKDOCS = BIN / "mkdocs"
README_MAX_LINES = 250


def _hook():
    spec = importlib.util.spec_from_file_location("_nevis_openapi_page", ROOT / "docs" / "hooks" / "openapi_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _offline_env() -> dict[str, str]:
    """The environment with every proxy pointed at a closed port: a fetch fails at once."""
    dead = "http://127.0.0.1:9"
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy",)}
    env.update(
        HTTP_PROXY=dead, HTTPS_PROXY=dead, http_proxy=dead, https_proxy=dead, ALL_PROXY=dead, NO_MKDOCS_2_WARNING="1"
    )
    return env


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=config.parent,
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    done = _build(ROOT / "mkdocs.yml", site)
    log = done.stdout + done.stderr
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{log[-6000:]}"
    assert "WARNING" not in log, log[-6000:]
    return site


def test_the_site_builds_strictly_offline(built_site: Path) -> None:
    pages = {p.relative_to(built_site).as_posix() for p in built_site.rglob("*.html")}
    for page in (
        "index.html",
        "learners.html",
        "running.html",
        "streams.html",
        "operators.html",
        "coordinator.html",
        "deploy.html",
        "isolation.html",
        "fidelity.html",
        "probes.html",
        "benchmarks.html",
        "architecture.html",
        "api.html",
    ):
        assert page in pages


def test_the_built_pages_fetch_nothing_from_the_internet(built_site: Path) -> None:
    remote = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)
    for page in built_site.rglob("*.html"):
        hits = [m.group(0) for m in remote.finditer(page.read_text()) if 'rel="canonical"' not in m.group(0)]
        assert not hits, f"{page.name} loads remote resources: {hits[:3]}"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Strict mode is in force: the same site with one broken link does not build."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.png", "__pycache__"))
    shutil.copytree(ROOT / "api_schema", tmp_path / "api_schema")
    page = tmp_path / "docs" / "index.md"
    page.write_text(page.read_text() + "\nSee [nothing](no-such-page.md).\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr


def test_the_nav_names_pages_that_exist_or_may_come() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    hook = _hook()

    def pages(nav):
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from pages(value) if isinstance(value, list) else [value]

    named = list(pages(config["nav"]))
    missing = [p for p in named if p != hook.PAGE and not (ROOT / "docs" / p).is_file()]
    assert set(missing) <= hook.OPTIONAL_PAGES, missing
    assert {"fidelity.md", "probes.md", "learners.md", "operators.md", "benchmarks.md", hook.PAGE} <= set(named)
    assert config["theme"]["font"] == "false", "web fonts are fetched from the internet"


def test_the_api_page_names_every_route_and_schema() -> None:
    hook = _hook()
    spec = json.loads((ROOT / "api_schema" / "openapi.json").read_text())
    page = hook.render(spec)
    for path, item in spec["paths"].items():
        for method in item:
            if method in hook.METHODS:
                assert f"### `{method.upper()} {path}`" in page
    for name in spec["components"]["schemas"]:
        assert f"### {name} {{#schema-" in page


def test_the_readme_is_short_and_states_the_three_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    for command in (
        "./scripts/setup.sh",
        ".venv/bin/nevis run --stream mini --learner indep_small",
        "./scripts/test.sh",
    ):
        assert f"`{command}`" in text
    # CI runs the same two scripts (.ci/run), so the README's commands are the ones CI proves.
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./scripts/setup.sh" in ci and "./scripts/test.sh" in ci


def test_the_readme_links_to_files_that_exist() -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text()):
        if not re.match(r"[a-z]+://", target):
            assert (ROOT / target).exists(), f"README links to a missing file: {target}"


def _readme_nevis_commands() -> list[list[str]]:
    """The subcommand words of every `nevis ...` command in the README's shell blocks."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code = line.split("  #", 1)[0]  # a comment after the command
            for match in re.finditer(r"(?<![\w/.-])nevis((?:\s+[a-z][a-z-]*(?=\s|$)){1,2})", code):
                commands.append(match.group(1).split())
    return commands


def test_every_nevis_command_in_the_readme_exists() -> None:
    from typer.testing import CliRunner

    from services.cli.main import app

    commands = _readme_nevis_commands()
    assert {"run", "check", "submit", "leaderboard"} <= {c[0] for c in commands}
    runner = CliRunner()
    for words in sorted({tuple(c) for c in commands}):
        done = runner.invoke(app, [*words, "--help"])
        assert done.exit_code == 0, (
            f"the README names a command that does not exist: nevis {' '.join(words)}\n{done.output}"
        )
        assert "Usage: nevis " + " ".join(words) in " ".join(done.output.split())
