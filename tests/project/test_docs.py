"""What a reader meets first must not be broken: no merge-conflict markers in any tracked text file, and every
relative link in README.md and docs/ points to a file that exists (and, for ``#anchor`` links into a markdown file,
to a heading it has, slugged as GitHub slugs it). Runs in ``make test``, so CI fails on either."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

from conftest import REPO

#: the lines git writes around a conflict (``|||||||`` with diff3), at the start of a line
_MARKER = re.compile(r"^(?:<{7}|\|{7}|>{7})(?: .*)?$|^={7}$")
#: ``[text](target)`` and ``![alt](target)``, the target up to its first space (a title may follow)
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+[^)]*)?\)")
#: ``[label]: target`` reference definitions
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+\s*)?$")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


def tracked_files(root: Path = REPO) -> list[Path]:
    """The repository's tracked files (``git ls-files``)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [root / name for name in listed.decode().split("\0") if name and (root / name).is_file()]


def conflict_markers(paths: Iterable[Path], root: Path = REPO) -> list[str]:
    """``file:line: marker`` for each conflict-marker line in the text files among ``paths`` (files holding a NUL
    byte are binary and skipped)."""
    found = []
    for path in paths:
        data = path.read_bytes()
        if b"\0" in data:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if _MARKER.match(line):
                found.append(f"{path.relative_to(root)}:{number}: {line[:40]}")
    return found


def markdown_lines(text: str, *, blank_code: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans blanked out unless ``blank_code`` is off."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)[0] * len(opening.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        yield number, re.sub(r"(`+).+?\1", lambda span: " " * len(span.group(0)), line) if blank_code else line


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text (link targets, code ticks and emphasis marks dropped)
    lower-cased, every character but letters, digits, ``_``, ``-`` and spaces removed, spaces turned into ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays, its target goes
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", text)  # emphasis marks, not underscores inside words
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a markdown file offers: its headings' slugs (a repeated slug gets ``-1``, ``-2``, ... as on
    GitHub) and HTML ``name`` / ``id`` anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    previous = ""
    for _, line in markdown_lines(path.read_text(encoding="utf-8"), blank_code=False):
        heading = _ATX_HEADING.match(line)
        text = heading.group(2) if heading else None
        if text is None and previous.strip() and re.fullmatch(r"\s{0,3}(=+|-+)\s*", line):  # setext heading
            text = previous.strip()
        if text is not None:
            slug = github_slug(text)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(_HTML_ANCHOR.findall(line))
        previous = "" if heading else line
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every inline and reference link outside code."""
    for number, line in markdown_lines(text):
        for match in _INLINE_LINK.finditer(line):
            yield number, match.group(1)
        reference = _REFERENCE_LINK.match(line)
        if reference:
            yield number, reference.group(1)


def broken_links(paths: Iterable[Path], root: Path = REPO) -> list[str]:
    """``file:line: target (why)`` for each relative link among ``paths`` that points to nothing: a missing file
    or folder, or a ``#anchor`` that the markdown file it points into does not have."""
    broken = []
    for path in paths:
        for number, target in links(path.read_text(encoding="utf-8")):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                continue  # https:, mailto:, ...: not a file of the repository
            file_part, _, anchor = unquote(target).partition("#")
            file_part = file_part.split("?")[0]
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{where} (no heading with anchor #{anchor} in {linked.name})")
    return broken


def documentation(root: Path = REPO) -> list[Path]:
    """README.md and every markdown file under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def test_no_tracked_file_holds_a_merge_conflict_marker():
    found = conflict_markers(tracked_files())
    assert not found, "merge-conflict markers left in:\n" + "\n".join(found)


def test_every_relative_link_of_the_readme_and_the_docs_points_to_something():
    broken = broken_links(documentation())
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_a_planted_marker_or_broken_link_is_found(tmp_path):
    ours = "<" * 7 + " HEAD"
    (tmp_path / "notes.md").write_text(f"# Notes\n\n{ours}\nmine\n{'=' * 7}\ntheirs\n{'>' * 7} branch\n")
    (tmp_path / "data.bin").write_bytes(b"\0" + ours.encode())
    (tmp_path / "table.md").write_text("Title\n=====\n\n| a |\n|---|\n\n" + "=" * 8 + "\n")
    found = conflict_markers(sorted(tmp_path.iterdir()), tmp_path)
    assert found == ["notes.md:3: <<<<<<< HEAD", "notes.md:5: =======", "notes.md:7: >>>>>>> branch"]

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        '# The `run` command: every option\n\n## Options\n\n### Options\n\n<a name="kept"></a>\n'
    )
    (tmp_path / "README.md").write_text(
        "See [the guide](docs/guide.md#the-run-command-every-option), [twice](docs/guide.md#options-1),\n"
        "[an HTML anchor](docs/guide.md#kept), [here](#top), [the web](https://example.org/x.md#nowhere).\n"
        "[gone](docs/missing.md) and [no heading](docs/guide.md#options-2) and `[code](nowhere.md)`\n\n"
        "```\n[fenced](nowhere.md)\n```\n\n# Top\n\n[ref]: docs/also-missing.md\n"
    )
    assert broken_links([tmp_path / "README.md"], tmp_path) == [
        "README.md:3: docs/missing.md (no such file)",
        "README.md:3: docs/guide.md#options-2 (no heading with anchor #options-2 in guide.md)",
        "README.md:11: docs/also-missing.md (no such file)",
    ]


def test_github_slugs_of_headings_the_docs_link_to():
    assert github_slug("`layer-mteb cost`: what each layer costs") == "layer-mteb-cost-what-each-layer-costs"
    assert github_slug("Your own tasks") == "your-own-tasks"
    assert (
        github_slug("Table 1 (workshop version) — *LLM2Vec*, [Pythia](x.md)")
        == "table-1-workshop-version--llm2vec-pythia"
    )
    assert github_slug("max_length and __init__") == "max_length-and-init"
