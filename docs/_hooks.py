"""MkDocs hooks for the docs site (mkdocs.yml): the README's quick start on the home page, and
links that leave docs/ turned into links to the repository, each checked to exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
# tests/test_docs.py reads words after a fence's language ("```sh no-run"); Markdown does not.
FENCE_MARKS = re.compile(r"^(?P<fence>[ \t]*`{3,})(?P<lang>[\w+-]+)[ \t]+[\w -]+$", re.M)


def _quick_start() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Quick start")
    end = readme.index("\n## ", start + 1)
    return readme[start:end].strip() + "\n"


def _outside(target: str, page_dir: Path, repo: str) -> str | None:
    """The repository address of a relative link that leaves docs/, or None for one inside it."""
    if "://" in target or target.startswith(("mailto:", "/")):
        return None
    path = (page_dir / target).resolve()
    docs = ROOT / "docs"
    if path == docs or docs in path.parents:
        return None
    if not path.exists():
        raise ValueError(f"a link to {target} leaves docs/ for a path that does not exist ({path})")
    kind = "tree" if path.is_dir() else "blob"
    return f"{repo}/{kind}/main/{path.relative_to(ROOT).as_posix()}"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    src = Path(page.file.abs_src_path)
    if page.file.src_uri == "index.md":
        # The README's links are relative to the repository root: docs/x.md is x.md here.
        quick = _quick_start().replace("](docs/", "](")
        title, _, rest = markdown.partition("\n")
        markdown = f"{title}\n\n{quick}\n{rest}"
    repo = str(config["repo_url"]).rstrip("/")

    def rewrite(match: re.Match[str]) -> str:
        address = _outside(match["target"], src.parent, repo)
        if address is None:
            return match.group(0)
        return f"]({address}{match['anchor'] or ''})"

    return LINK.sub(rewrite, FENCE_MARKS.sub(r"\g<fence>\g<lang>", markdown))
