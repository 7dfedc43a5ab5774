"""An English-Spanish corpus of human translations: the Spanish gettext catalogs that
LibreOffice (Debian's libreoffice-l10n-es) and 18 Python projects (their PyPI wheels) ship.

    python benchmarks/gettext_corpus/build.py --out=$HOME/gettext_es

(About 20 s on 2 cores with the downloads, about 170 MB; 3 s from the cache.)

1. Fetches each package of SOURCES (sources.py), pinned by name, version and sha256, into
   `--cache` (skipped when the file is there): `pip download --no-deps --only-binary=:all:
   NAME==VERSION` for wheels, `apt-get download NAME=VERSION` for the Debian package.
2. Reads its Spanish catalogs (`.po`, else `.mo`) and keeps the translated entries that are
   neither fuzzy nor obsolete, the first (singular) form of plural ones; cleans each pair as
   clean.py says (placeholders masked to `{}`, accelerator marks removed, markup and mismatched
   placeholders left out, white space normalised).
3. Splits by package (SOURCES' `split` column), so that no project's near-duplicate strings are
   on both sides of a split; removes repeated pairs within a split (an English string with
   several translations keeps each: they are different contexts' correct translations); removes
   from validation what the test split holds, and from training what either holds, comparing
   English sides ignoring case, punctuation and spacing.
4. Writes into `--out` the layout configs/text.py reads: `{train,valid,test}.{en,es}` (one
   sentence a line, aligned), `{split}.jsonl` (line for line: the pair, its package, version,
   licence and catalog), README.md (sources, licences, counts) and manifest.json. The same
   pins give byte-identical files. Everything is written to a temporary folder first and moved
   into place at the end: a failure leaves `--out` as it was.

Only the Python standard library is used (with pip and apt-get as commands).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gettext_corpus import catalogs, clean  # noqa: E402
from benchmarks.gettext_corpus.download import DownloadError, Runner, fetch  # noqa: E402
from benchmarks.gettext_corpus.sources import SOURCES, SPLITS, Source, check_sources  # noqa: E402

DEFAULT_CACHE = pathlib.Path(
    os.environ.get(
        "GETTEXT_CORPUS_CACHE", pathlib.Path.home() / ".cache" / "transformer_jax" / "gettext"
    )
)
MARKER = "gettext-en-es"  # manifest.json's "corpus": an --out folder this script may replace.


def source_catalogs(source: Source, path: pathlib.Path) -> list[tuple[str, bytes]]:
    """The Spanish catalogs in a fetched package: (member path, bytes), sorted. A catalog
    shipped both as `.po` and as `.mo` is read from the `.po` (which marks fuzzy entries)."""
    found = catalogs.archive_files(path.name, path.read_bytes(), re.compile(source.catalogs))
    if not found:
        raise ValueError(
            f"{path}: no member matches {source.catalogs!r} ({source.name}): the "
            f"package no longer ships Spanish catalogs there; fix SOURCES."
        )
    names = {name for name, _ in found}
    return [(n, d) for n, d in found if not (n.endswith(".mo") and n[:-3] + ".po" in names)]


@dataclasses.dataclass(frozen=True)
class Pair:
    """One line of the corpus and where it came from (a line of `{split}.jsonl`)."""

    en: str
    es: str
    package: str
    version: str
    licence: str
    catalog: str


def _unusable(message: catalogs.Message) -> str | None:
    """Why an entry gives no pair before its text is looked at, or None."""
    if message.obsolete:
        return "obsolete"
    if message.fuzzy:
        return "fuzzy"
    if not message.msgstr[0]:
        return "untranslated"
    return None


def package_pairs(
    source: Source, files: Iterable[tuple[str, bytes]], counts: collections.Counter
) -> list[Pair]:
    """The clean pairs of one package's catalogs, in catalog and file order; what was left out
    and why is added to `counts` (keys: "entries", "fuzzy", "obsolete", "untranslated", the
    reasons of clean.clean_pair, "kept")."""
    pairs = []
    for name, data in files:
        for message in catalogs.read_catalog(name, data, f"{source.file}:{name}"):
            if not message.msgid:
                continue  # The header.
            counts["entries"] += 1
            reason = _unusable(message)
            if reason is None:
                english = message.default or message.msgid  # Zope ids carry their English.
                cleaned = clean.clean_pair(english, message.msgstr[0], source.accelerators)
                reason = cleaned if isinstance(cleaned, str) else None
            if reason is not None:
                counts[reason] += 1
                continue
            counts["kept"] += 1
            pairs.append(Pair(*cleaned, source.name, source.version, source.licence, name))
    return pairs


def split_pairs(
    pairs: Sequence[Pair], split_of: dict[str, str], counts: dict[str, collections.Counter]
) -> dict[str, list[Pair]]:
    """Assigns pairs to splits by package, removes repeats and cross-split English strings.

    Args:
      pairs: every clean pair, in SOURCES order.
      split_of: package name -> split.
      counts: per package, "repeated" and "in a held-out split" are added.

    Returns:
      split -> pairs, each split ordered by the sha256 of "en<TAB>es" (a fixed shuffle, so that
      the first lines, which training decodes for validation BLEU, span every catalog).
    """
    by_split: dict[str, list[Pair]] = {s: [] for s in SPLITS}
    seen: dict[str, set[tuple[str, str]]] = {s: set() for s in SPLITS}
    for pair in pairs:
        split = split_of[pair.package]
        if (pair.en, pair.es) in seen[split]:
            counts[pair.package]["repeated"] += 1
            continue
        seen[split].add((pair.en, pair.es))
        by_split[split].append(pair)
    held_out: set[str] = set()
    for split in ("test", "valid", "train"):
        kept = []
        for pair in by_split[split]:
            if clean.leak_key(pair.en) in held_out:
                counts[pair.package]["in a held-out split"] += 1
            else:
                kept.append(pair)
        by_split[split] = kept
        held_out |= {clean.leak_key(p.en) for p in kept}
    for kept in by_split.values():
        kept.sort(key=lambda p: hashlib.sha256(f"{p.en}\t{p.es}".encode()).digest())
    return by_split


def _words(text: str) -> int:
    return len(text.split())


def readme(
    sources: Sequence[Source],
    by_split: dict[str, list[Pair]],
    counts: dict[str, collections.Counter],
) -> str:
    """The output folder's README.md: sources, licences, counts per package and split."""
    per_package = collections.Counter(p.package for pairs in by_split.values() for p in pairs)
    lines = [
        "# English-Spanish pairs from gettext catalogs",
        "",
        "Human translations of user-interface strings, taken from the Spanish message catalogs "
        "that the packages below ship, by `benchmarks/gettext_corpus/build.py` of transformer_jax. "
        "Each pair keeps its package's licence (`{split}.jsonl` names it line by line). "
        "Placeholders are masked as `{}`, accelerator marks removed; whole packages are held "
        "out for validation and test, and training holds no English string of either.",
        "",
        "Files: `{train,valid,test}.en` and `.es` (aligned, one string a line), "
        "`{split}.jsonl` (the same lines with package, version, licence and catalog), "
        "`manifest.json` (pins and counts).",
        "",
        "## Sources",
        "",
        "| package | version | registry | licence | split | pairs | entries | fuzzy | obsolete "
        "| untranslated | markup | placeholders differ | equal | other left out | repeated "
        "| in a held-out split |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    named = ("fuzzy", "obsolete", "untranslated", "markup", "placeholders differ", "equal")
    for s in sources:
        c = counts[s.name]
        other = sum(c[k] for k in ("identifier", "control character", "empty", "no letter"))
        cells = [
            s.name,
            s.version,
            s.registry,
            s.licence,
            s.split,
            f"{per_package[s.name]:,}",
            f"{c['entries']:,}",
            *(f"{c[k]:,}" for k in named),
            f"{other:,}",
            f"{c['repeated']:,}",
            f"{c['in a held-out split']:,}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "`entries`: the catalogs' entries (headers aside); `pairs`: those in the corpus. "
        "`other left out`: an identifier instead of English, empty after cleaning, no letter "
        "in the English, or a control character. `repeated`: a pair already taken from this split.",
        "",
        "## Splits",
        "",
        "| split | pairs | English words | Spanish words | distinct English | packages |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for split in SPLITS:
        pairs = by_split[split]
        packages = ", ".join(s.name for s in sources if s.split == split)
        lines.append(
            f"| {split} | {len(pairs):,} | {sum(_words(p.en) for p in pairs):,} | "
            f"{sum(_words(p.es) for p in pairs):,} | {len({p.en for p in pairs}):,} | {packages} |"
        )
    lines += [
        "",
        "## Training on it",
        "",
        "From the transformer_jax repository, with DIR this folder:",
        "",
        "```bash",
        "python train.py --config=configs/text.py --workdir=runs/gettext_es \\",
        *(
            f"    --config.data.text_{field}_src=DIR/{split}.en "
            f"--config.data.text_{field}_tgt=DIR/{split}.es \\"
            for field, split in (("train", "train"), ("eval", "valid"), ("test", "test"))
        ),
        "    --config.test_sentences=-1",
        "```",
        "",
    ]
    return "\n".join(lines)


def _write(path: pathlib.Path, lines: Iterable[str]) -> None:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8", newline="\n")


def write_corpus(
    folder: pathlib.Path,
    sources: Sequence[Source],
    by_split: dict[str, list[Pair]],
    counts: dict[str, collections.Counter],
) -> None:
    """Writes every output file into `folder` (which exists and is empty)."""
    for split, pairs in by_split.items():
        _write(folder / f"{split}.en", (p.en for p in pairs))
        _write(folder / f"{split}.es", (p.es for p in pairs))
        _write(
            folder / f"{split}.jsonl",
            (json.dumps(dataclasses.asdict(p), ensure_ascii=False) for p in pairs),
        )
    (folder / "README.md").write_text(readme(sources, by_split, counts), encoding="utf-8")
    manifest = {
        "corpus": MARKER,
        "sources": [dataclasses.asdict(s) for s in sources],
        "pairs": {split: len(pairs) for split, pairs in by_split.items()},
        "counts": {s.name: dict(sorted(counts[s.name].items())) for s in sources},
    }
    (folder / "manifest.json").write_text(
        json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def _check_out(out: pathlib.Path) -> None:
    """Refuses an --out that exists and is not an earlier corpus of this script (or empty)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"--out={out} is a file; name a folder (it is created).")
    if not any(out.iterdir()):
        return
    try:
        ours = json.loads((out / "manifest.json").read_text())["corpus"] == MARKER
    except (OSError, ValueError, KeyError, TypeError):
        ours = False
    if not ours:
        raise ValueError(
            f"--out={out} holds files that this script did not write (no "
            f"manifest.json of a {MARKER} corpus); name a new or empty folder."
        )


def build(
    out: pathlib.Path,
    cache: pathlib.Path,
    sources: Sequence[Source] = SOURCES,
    runner: Runner = subprocess.run,
    log: Callable[[str], None] = print,
) -> dict:
    """Fetches, reads, cleans, splits and writes the corpus; see the module docstring.

    Args:
      out: the output folder; replaced only once everything is written.
      cache: the download folder.
      sources: the pins.
      runner: runs download commands (tests pass a fake).
      log: where progress lines go.

    Returns:
      The manifest: {"pairs": {split: count}, "counts": {package: Counter}, ...}.

    Raises:
      DownloadError: a package could not be fetched (nothing is written to `out`).
      ValueError: a bad --out, SOURCES or catalog.
    """
    out = out.resolve()
    _check_out(out)
    check_sources(sources)
    paths = {}
    for source in sources:  # Every download before anything is written.
        start = time.perf_counter()
        paths[source.name] = fetch(source, cache, runner)
        log(f"fetched {source.name}=={source.version} ({time.perf_counter() - start:.1f} s)")
    counts: dict[str, collections.Counter] = {s.name: collections.Counter() for s in sources}
    pairs = []
    for source in sources:
        files = source_catalogs(source, paths[source.name])
        pairs += package_pairs(source, files, counts[source.name])
        log(f"read {source.name}: {len(files)} catalogs, {counts[source.name]['kept']:,} pairs")
    by_split = split_pairs(pairs, {s.name: s.split for s in sources}, counts)

    out.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"  # os.mkdir, unlike mkdtemp, keeps the umask.
    tmp, old = (out.parent / f".{out.name}.{kind}-{tag}" for kind in ("tmp", "old"))
    os.mkdir(tmp)
    try:
        write_corpus(tmp, sources, by_split, counts)
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        for leftover in (tmp, old):
            if leftover.exists():
                shutil.rmtree(leftover)
    return json.loads((out / "manifest.json").read_text())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        required=True,
        type=pathlib.Path,
        help="output folder (created; an earlier corpus there is replaced)",
    )
    parser.add_argument(
        "--cache",
        type=pathlib.Path,
        default=DEFAULT_CACHE,
        help=f"download folder (default {DEFAULT_CACHE}, or $GETTEXT_CORPUS_CACHE)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        manifest = build(args.out, args.cache)
    except (DownloadError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    pairs = manifest["pairs"]
    print(
        f"wrote {args.out}: "
        + ", ".join(f"{s} {pairs[s]:,}" for s in SPLITS)
        + f" pairs in {time.perf_counter() - start:.0f} s; see {args.out / 'README.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
