"""The documentation points at things that exist: every relative link (and its #anchor), every
`python` command line in a fenced code block (its script, its module, its --config file), every
command line of the package parsed by the command's own flags (`train.py`, `python -m
transformer_jax X`, `transformer-jax X`, and the deprecated `python -m transformer_jax.X`:
unknown flags, bad values, arguments a command does not take, `--config.` fields the config
lacks), and no page or config tells how the work was organised instead of what the software
does."""

from __future__ import annotations

import importlib
import importlib.util
import pathlib
import re
import shlex

import pytest

from transformer_jax import cli
from transformer_jax.cli import train as train_cli
from transformer_jax.cli.common import HELP_FLAGS, UsageError

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
# A `python` or `transformer-jax` command: at the start of a line (after an optional `$ `
# prompt and VAR=value assignments) or after `&&`, `||`, `|` or `;`.
PYTHON_COMMAND = re.compile(
    r"(?:^|&&|\|\|?|;)\s*(?:\$\s+)?(?:[A-Za-z_]\w*=\S*\s+)*(?:python3?|transformer-jax)\s"
)
PROGRAM = re.compile(r"python3?|transformer-jax")
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
    """Every heading anchor of a markdown text, GitHub-style (repeats get -1, -2, ...), and every
    `<a id="...">` (an old heading's anchor kept for the links to it)."""
    prose, _ = split_fences(text)
    found: set[str] = set(re.findall(r'<a id="([^"]+)"></a>', prose))
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
        if info in ("python", "py", "text"):  # code, or what a command prints
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
                    if command and PROGRAM.fullmatch(command[0]):
                        commands.append(command)
                    command = []
                else:
                    command.append(token)
    return commands


def command_problems(command: list[str]) -> list[str]:
    """What a `python` command names that does not exist: a script, a module, a config file."""
    problems = []
    args = command[1:]
    if command[0] == "transformer-jax":
        return problems
    if args[:1] == ["-m"] and len(args) > 1:
        spec = importlib.util.find_spec(args[1])
        if spec is None:
            problems.append(f"python -m {args[1]}: no such module")
        elif spec.submodule_search_locations is not None:  # a package runs its __main__
            if importlib.util.find_spec(f"{args[1]}.__main__") is None:
                problems.append(f"python -m {args[1]}: a package without __main__")
    elif args and not args[0].startswith("-"):
        if not (ROOT / args[0]).is_file():
            problems.append(f"python {args[0]}: no such script")
    for arg in args:
        config = re.fullmatch(r"--config=(\S+)", arg)
        if config and not (ROOT / config.group(1)).is_file():
            problems.append(f"{arg}: no such config file")
    return problems


def package_command(command: list[str]) -> tuple[str, list[str]] | None:
    """(subcommand, its arguments) of a command line of the package (`python train.py`,
    `python -m transformer_jax X`, `transformer-jax X`, and the modules
    `python -m transformer_jax[.cli].X`, `python -m transformer_jax.cli X`); None for another
    program. Redirections (`< in.txt`, `> out.txt`, `2>&1`) are the shell's, not the command's."""
    head, args = command[0], command[1:]
    if head == "transformer-jax":
        name, args = (args[0], args[1:]) if args else ("", [])
    elif args[:1] == ["train.py"]:
        name, args = "train", args[1:]
    elif args[:1] == ["-m"] and args[1:2] in (["transformer_jax"], ["transformer_jax.cli"]):
        name, args = (args[2], args[3:]) if len(args) > 2 else ("", [])
    elif args[:1] == ["-m"] and len(args) > 1:
        module = re.fullmatch(r"transformer_jax(?:\.cli)?\.(\w+)", args[1])
        if not module:
            return None
        name, args = module.group(1), args[2:]
    else:
        return None
    name = name.replace("_", "-")  # the console command takes fill_mask for fill-mask
    kept, skip = [], False
    for i, arg in enumerate(args):
        redirect = bool(re.fullmatch(r"[<>&|]+", arg))
        if skip or redirect or (arg.isdigit() and i + 1 < len(args) and args[i + 1][:1] in "<>"):
            skip = redirect  # the file or descriptor it names
            continue
        kept.append(arg)
    return name, kept


def flag_problems(command: list[str]) -> list[str]:
    """What the command's own flag parser refuses in a command line of the package."""
    found = package_command(command)
    if found is None:
        return []
    name, argv = found
    if name in (*HELP_FLAGS, "help") or any(arg in HELP_FLAGS for arg in argv):
        return []
    if name == "train":
        check = train_cli.check_command_line
    elif name in cli.COMMANDS:
        check = importlib.import_module(
            f"transformer_jax.cli.{cli.COMMANDS[name][0]}"
        ).COMMAND.parse
    else:
        return [f"{shlex.join(command[:3])}: no such command"]
    try:
        check(argv)
    except UsageError as e:
        return [f"{shlex.join(command)}: {e}"]
    return []


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
def test_every_command_of_the_package_parses(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # --config=configs/... is relative to the repository root
    commands = command_lines(page.read_text(encoding="utf-8"))
    problems = [p for c in commands for p in flag_problems(c)]
    assert not problems, f"{page.relative_to(ROOT)}:\n" + "\n".join(problems)


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
    """A broken link, a missing anchor, script, module (or a package's __main__) or config file
    is each reported."""
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
        "python -m transformer_jax translate --workdir=w; python -m transformer_jax.models\n"
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
        "python -m transformer_jax.models: a package without __main__",
    ]
    assert FORBIDDEN.search("measured in this Session") and FORBIDDEN.search("see issue 12")
    assert FORBIDDEN.search("the earlier run") and FORBIDDEN.search("accuracy was 25.3%")


def test_the_flag_check_catches_what_it_is_for(monkeypatch):
    """An unknown flag, an argument a command takes none of, a `--config.` field the config
    lacks and a bad value are each refused; redirections and --help are not the command's."""
    monkeypatch.chdir(ROOT)
    text = (
        "```bash\n"
        'python -m transformer_jax fill-mask --workdir=runs/bert "Paris is the [MASK]."\n'
        "transformer-jax translate --workdir=w --beam_sise=4 < in.txt > out.txt 2>&1\n"
        "python train.py --config=configs/tiny.py --workdir=w --config.model.d_modle=8\n"
        "python -m transformer_jax.cli.evaluate --workdir=w --max_sentences=many\n"
        "transformer-jax no-such-command --workdir=w\n"
        "python train.py --config=configs/tiny.py --workdir=w --config.model.d_model=8\n"
        "echo 'a' | transformer-jax translate --workdir=w --beam_size=4 < in.txt > out.txt 2>&1\n"
        "transformer-jax compile --help\n"
        "python -m transformer_jax --help && transformer-jax help\n"
        "echo 'a' | python -m transformer_jax generate --workdir=w --prompt=x --top_p=high\n"
        "```\n"
    )
    problems = [p for c in command_lines(text) for p in flag_problems(c)]
    assert len(problems) == 6, problems
    for expected in (
        "unexpected arguments", "beam_sise", "d_modle", "max_sentences", "no such", "top_p=high"
    ):  # fmt: skip
        assert any(expected in p for p in problems), (expected, problems)
