"""The docs site (mkdocs.yml, built strictly by CI): every page in its navigation, the public API in its reference."""

from __future__ import annotations

import re
from pathlib import Path

import pyorb
import pyorb.model
import pyorb.testing

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CONFIG = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_the_navigation_reaches_every_page() -> None:
    in_nav = set(re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)$", CONFIG, re.M))
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.glob("*.md")}
    assert pages == in_nav, f"not in mkdocs.yml's nav: {sorted(pages - in_nav)}; missing: {sorted(in_nav - pages)}"


def test_the_site_is_built_strictly_with_link_and_anchor_checks() -> None:
    assert re.search(r"^strict: true$", CONFIG, re.M)
    for check in ("omitted_files", "unrecognized_links", "anchors"):
        assert re.search(rf"^  {check}: warn$", CONFIG, re.M), check


def test_the_api_reference_documents_every_public_name() -> None:
    page = (DOCS / "api.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)$", page, re.M))
    for package in (pyorb, pyorb.testing, pyorb.model):
        exports = getattr(package, "_EXPORTS", {})
        for name in package.__all__:
            module = exports.get(name) or getattr(getattr(package, name), "__module__", package.__name__)
            assert f"{module}.{name}" in documented, f"{package.__name__}.{name} is not in docs/api.md"
    for subpackage in ("pyorb.naming", "pyorb.typed", "pyorb.locust", "pyorb.interceptors", "pyorb.tls"):
        assert subpackage in documented, subpackage

