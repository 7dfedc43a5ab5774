"""The documentation points at things that exist: every relative link (and its #anchor), every
`python` command line in a fenced code block (its script, its module, its --config file), and
no page tells how the work was organised instead of what the software does."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shlex

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](target), ![alt](target)
INLINE_CODE = re.compile(r"`+[^`\n]*`+")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # https:, mailto:, ...
# A `python` command: at the start of a line (after an optional `$ ` prompt and VAR=value
# assignments) or after `&&`, `||`, `|` or `;`.
PYTHON_COMMAND = re.compile(r"(?:^|&&|\|\|?|;)\s*(?:\$\s+)?(?:[A-Za-z_]\w*=\S*\s+)*python3?\s")
SEPARATORS = {"&&", "||", "|", ";", "&"}
# How the work was organised is not documentation: words that only a lab log would use.
FORBIDDEN = re.compile(
    r"\bsessions?\b|\bissues? ?#?[0-9]|\bthe issue'?s?\b|\bworktrees?\b|previous version"
    r"|tried and not kept|\bcommit [0-9a-f]{7,}|earlier run|we tried|\bwas [0-9.]+%|previous",
    re.IGNORECASE,
)


def split_fences(text: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """The prose of a markdown page (fenced blocks blanked) and its fenced blocks as
    (info string, lines)."""
    prose, blocks, block = [], [], None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if block is None and fence:
            block = (line.strip()[3:].strip().lower(), [])
            prose.append("")
        elif block is not None and fence:
            blocks.append(block)
            block = None
            prose.append("")
        elif block is not None:
            block[1].append(line)
            prose.append("")
        else:
            prose.append(line)
    assert block is None, "a fenced code block is never closed"
    return "\n".join(prose), blocks


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, markup and punctuation dropped, lower
    case, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a markdown text, GitHub-style (repeats get -1, -2, ...)."""
    prose, _ = split_fences(text)
    found: set[str] = set()
    for line in prose.splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            name, n = base, 0
            while name in found:
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def broken_links(page: pathlib.Path, text: str) -> list[str]:
    """Relative links of `text` (the content of `page`) whose file or #anchor does not exist."""
    prose, _ = split_fences(text)
    prose = INLINE_CODE.sub("", prose)
    problems = []
    for target in LINK.findall(prose):
        if SCHEME.match(target) or target.startswith("//"):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            problems.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md":
            found = anchors(text if path == page else path.read_text(encoding="utf-8"))
            if anchor not in found:
                problems.append(f"{target}: no heading with that anchor in {path.name}")
    return problems


def command_lines(text: str) -> list[list[str]]:
    """Each `python ...` command of the fenced shell blocks of `text`, as argument lists."""
    _, blocks = split_fences(text)
    commands = []
    for info, lines in blocks:
        if info in ("python", "py"):
            continue
        joined = "\n".join(lines).replace("\\\n", " ")
        for line in joined.splitlines():
            if not PYTHON_COMMAND.search(line):
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            command: list[str] = []
            for token in [*lexer, ";"]:
                if token in SEPARATORS:
                    while command and (
                        command[0] == "$" or re.match(r"^[A-Za-z_]\w*=", command[0])
                    ):
                        command.pop(0)
                    if command and re.fullmatch(r"python3?", command[0]):
                        commands.append(command)
                    command = []
                else:
                    command.append(token)
    return commands


def command_problems(command: list[str]) -> list[str]:
    """What a `python` command names that does not exist: a script, a module, a config file."""
    problems = []
    args = command[1:]
    if args[:1] == ["-m"] and len(args) > 1:
        if importlib.util.find_spec(args[1]) is None:
            problems.append(f"python -m {args[1]}: no such module")
    elif args and not args[0].startswith("-"):
        if not (ROOT / args[0]).is_file():
            problems.append(f"python {args[0]}: no such script")
    for arg in args:
        config = re.fullmatch(r"--config=(\S+)", arg)
        if config and not (ROOT / config.group(1)).is_file():
            problems.append(f"{arg}: no such config file")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_resolves(page):
    assert page.exists()
    problems = broken_links(page, page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_python_command_names_what_exists(page):
    commands = command_lines(page.read_text(encoding="utf-8"))
    problems = [p for c in commands for p in command_problems(c)]
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_page_reads_as_a_lab_log(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    found = [f"{n}: {line.strip()}" for n, line in enumerate(lines, 1) if FORBIDDEN.search(line)]
    assert not found, f"{page.relative_to(ROOT)}: " + "; ".join(found)


CONFIGS = sorted((ROOT / "configs").glob("*.py"))


@pytest.mark.parametrize("config", CONFIGS, ids=[p.name for p in CONFIGS])
def test_no_config_reads_as_a_lab_log(config):
    """A config says what it does and where its figures are, not how it came to be."""
    lines = config.read_text(encoding="utf-8").splitlines()
    found = [f"{n}: {line.strip()}" for n, line in enumerate(lines, 1) if FORBIDDEN.search(line)]
    assert not found, f"{config.relative_to(ROOT)}: " + "; ".join(found)


def test_the_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        assert f"](docs/{page.name})" in readme, f"README: no link to docs/{page.name}"


def test_the_checks_catch_what_they_are_for(tmp_path):
    """A broken link, a missing anchor, script, module or config file is each reported."""
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# A heading: with `code`\n\n## Twice\n\n## Twice\n")
    text = (
        "# Title\n[ok](other.md#a-heading-with-code) [ok](other.md#twice-1) [ok](#title)\n"
        "[gone](missing.md) [bad anchor](other.md#nope) [bad](#nope) [web](https://x.org/y)\n"
        "`[in code](missing.md)`\n"
        "```bash\n"
        "$ python train.py --config=configs/default.py\n"
        "echo 1 | python -m transformer_jax.no_such_module && python no_such.py \\\n"
        "    --config=configs/no_such.py  # a comment (with parentheses)\n"
        "```\n"
        "```python\npython = 1\n```\n"
    )
    page.write_text(text)
    assert broken_links(page, text) == [
        "missing.md: no such file",
        "other.md#nope: no heading with that anchor in other.md",
        "#nope: no heading with that anchor in page.md",
    ]
    problems = [p for c in command_lines(text) for p in command_problems(c)]
    assert problems == [
        "python -m transformer_jax.no_such_module: no such module",
        "python no_such.py: no such script",
        "--config=configs/no_such.py: no such config file",
    ]
    assert FORBIDDEN.search("measured in this Session") and FORBIDDEN.search("see issue 12")
    assert FORBIDDEN.search("the earlier run") and FORBIDDEN.search("accuracy was 25.3%")
