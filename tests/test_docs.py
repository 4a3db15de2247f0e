"""The docs a user navigates (issue #29, item 8): the README stays a user's guide of about 300
lines, every relative link of the README and docs/ leads to a file that exists, and
docs/operating.md names every option of `master serve` and `slave run`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from dumpfilter.cli.app import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_a_guide_not_a_report():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 330, f"README.md has {lines} lines: move reference or figures to docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_somewhere(page):
    missing = [target for target in LINK.findall(page.read_text())
               if "://" not in target and not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(ROOT)}: links to missing files: {missing}"


def test_the_link_check_sees_a_missing_file(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("[a](nowhere.md) [b](https://example.com) [c](p.md#x)")
    assert [t for t in LINK.findall(page.read_text()) if "://" not in t and not (tmp_path / t).exists()] \
        == ["nowhere.md"]


def _options(*command: str) -> set[str]:
    parser = build_parser(list(command))
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return {opt for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


@pytest.mark.parametrize("command", [("master", "serve"), ("slave", "run")], ids=" ".join)
def test_the_operators_reference_names_every_option(command):
    options = _options(*command)
    assert len(options) > 10
    text = (ROOT / "docs" / "operating.md").read_text()
    missing = sorted(opt for opt in options if not re.search(re.escape(opt) + r"(?![\w-])", text))
    assert not missing, f"docs/operating.md does not name these options of {' '.join(command)}: {missing}"
