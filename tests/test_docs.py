"""The documents stand on their own: every relative link resolves, every section the code cites
exists, nothing cites a document outside the repository, and the format's worked examples are
what the code computes.

Anchors are GitHub's: a heading's text in lower case, punctuation dropped, spaces as ``-``, and
``-1``, ``-2`` ... for repeats. A citation in code is ``docs/NAME.md#anchor``, optionally
followed by `` and #anchor`` for more sections of the same document.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from lakecore.core.locations import optimize_path, root_node_file_name

REPO = Path(__file__).resolve().parent.parent
# Where documents live, and where code cites them.
DOCUMENTS = sorted(
    path
    for pattern in ("*.md", "docs/*.md", "*/README.md", "bench/results/README.md")
    for path in REPO.glob(pattern)
    if not any(part.startswith(".") for part in path.relative_to(REPO).parts)
)
CODE_FOLDERS = ("lakecore", "jobs", "tests", "bench", "airflow_dags")
CODE_SUFFIXES = (".py", ".proto", ".sh", ".toml", ".md")

_FENCE = re.compile(r"^(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # link text may wrap onto the next line
_CITATION = re.compile(r"docs/([a-z0-9-]+\.md)((?:#[a-z0-9-]+)?)((?: and #[a-z0-9-]+)*)")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code removed."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(_INLINE_CODE.sub("", line))
    return out


def _slug(heading: str) -> str:
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6} (.+)$", line)
        if fenced or match is None:
            continue
        slug = _slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(found)


def _links(document: Path) -> list[str]:
    prose = "\n".join(_prose_lines(document.read_text(encoding="utf-8")))
    return [
        target
        for target in _LINK.findall(prose)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def _broken(document: Path, target: str) -> str | None:
    path_part, _, anchor = target.partition("#")
    linked = (document.parent / path_part).resolve() if path_part else document
    if not linked.exists():
        shown = linked.relative_to(REPO) if linked.is_relative_to(REPO) else linked
        return f"{target}: {shown} does not exist"
    if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
        return f"{target}: no heading of {linked.relative_to(REPO)} has the anchor #{anchor}"
    return None


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = [problem for t in _links(document) if (problem := _broken(document, t))]
    assert not broken, f"{document.relative_to(REPO)}: " + "; ".join(broken)


def _code_files() -> list[Path]:
    files = []
    for folder in CODE_FOLDERS:
        files += [p for p in (REPO / folder).rglob("*") if p.suffix in CODE_SUFFIXES]
    return [p for p in files if ".venv" not in p.parts and p.resolve() != Path(__file__)]


def test_every_section_the_code_cites_exists() -> None:
    cited = 0
    missing = []
    for path in _code_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        # A citation may wrap onto the next line of a docstring or comment.
        text = re.sub(r"\s*\n\s*(?:#\s*|//\s*)?", " ", text)
        for document, first, more in _CITATION.findall(text):
            target = REPO / "docs" / document
            wanted = [a[1:] for a in [first, *re.findall(r"#[a-z0-9-]+", more)] if a]
            cited += 1
            if not target.exists():
                missing.append(f"{path.relative_to(REPO)}: docs/{document} does not exist")
                continue
            missing += [
                f"{path.relative_to(REPO)}: docs/{document}#{a}"
                for a in wanted
                if a not in anchors(target)
            ]
    assert cited > 40, f"only {cited} citations found: is the pattern still right?"
    assert not missing, "; ".join(missing)


def test_nothing_cites_a_document_outside_the_repository() -> None:
    # Spelled in pieces so that this file does not cite them itself.
    outside = re.compile(
        r"\.\./" + "shared|" + r"(?<![\w/])LOOKUP-" + "FORMAT" + r"\.md|(?<![\w/-])FORMAT\.md"
    )
    found = []
    for path in [*_code_files(), *DOCUMENTS, REPO / "Makefile", REPO / "pyproject.toml"]:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if outside.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def _section(document: Path, heading: str) -> str:
    text = document.read_text(encoding="utf-8")
    start = text.index(f"\n### {heading}\n")
    end = text.find("\n## ", start + 1)
    following = text.find("\n### ", start + 1)
    stops = [i for i in (end, following) if i != -1]
    return text[start : min(stops)] if stops else text[start:]


def test_the_path_optimization_examples_are_what_the_code_computes() -> None:
    section = _section(REPO / "docs" / "format.md", "Path optimization")
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", section, flags=re.M)
    assert len(rows) >= 3
    for original, optimized in rows:
        assert optimize_path(original) == optimized


def test_the_root_file_name_examples_are_what_the_code_computes() -> None:
    section = _section(REPO / "docs" / "format.md", "File names")
    examples = re.findall(r"[Vv]ersion (\d+) (?:is )?`(_[01]{32}\.arrow)`", section)
    assert len(examples) >= 3
    for version, name in examples:
        assert root_node_file_name(int(version)) == name


def test_the_definition_messages_are_the_ones_the_code_reads() -> None:
    from lakecore.core.defs import pb

    text = (REPO / "docs" / "format.md").read_text(encoding="utf-8")
    block = text[text.index("```proto") : text.index("```", text.index("```proto") + 3)]
    documented: dict[str, dict[str, int]] = {}
    current = None
    for line in block.splitlines():
        header = re.match(r"^(message|enum) (\w+) \{", line)
        if header:
            current = header.group(2)
            documented[current] = {}
        for field, number in re.findall(r"(\w+) = (\d+);", line):
            assert current is not None
            documented[current][field] = int(number)
    actual: dict[str, dict[str, int]] = {}
    for message in pb.DESCRIPTOR.message_types_by_name.values():
        actual[message.name] = {f.name: f.number for f in message.fields}
    for enum in pb.DESCRIPTOR.enum_types_by_name.values():
        actual[enum.name] = {v.name: v.number for v in enum.values}
    assert documented == actual
