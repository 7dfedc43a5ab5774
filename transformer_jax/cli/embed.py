"""Embed texts with an encoder (BERT) run: one L2-normalised vector per input line, or the lines
ranked by cosine similarity to a query.

    transformer-jax convert --from_hf=path/to/all-MiniLM-L6-v2 --workdir=runs/minilm
    printf 'A man is eating food.\\nA woman plays violin.\\n' | \\
        python -m transformer_jax embed --workdir=runs/minilm --json
    python -m transformer_jax embed --workdir=runs/minilm --out=vectors.npy < sentences.txt
    python -m transformer_jax embed --workdir=runs/minilm --query="Who is eating?" < sentences.txt

Texts come from `--text` (repeatable) or stdin, one per line (UTF-8; see
`transformer_jax.cli.common`); an empty line is embedded as `[CLS] [SEP]`. The pooling is the
workdir's own when it was converted from sentence-transformers (its embedding.json, e.g. mean
for all-MiniLM-L6-v2), else mean; `--pooling` overrides it. Texts longer than the model's
longest input are cut, with a warning. Out: one line per text with its vector's numbers
separated by spaces (each the shortest decimal that reads back as the same float32), or with
`--json` one JSON list per line; `--out=FILE.npy` writes the float32 array [lines, dimension]
instead. With `--query`, the lines are written most similar first as `score<TAB>line`
(`--json`: {"index", "score", "text"}, index counting lines from 0), `--top_k` of them.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from absl import flags

from transformer_jax.cli import common
from transformer_jax.inference.embedder import Embedder
from transformer_jax.inference.pooling import POOLINGS


def number(x: np.float32) -> str:
    """The shortest decimal that reads back as the same float32 (valid JSON too)."""
    return np.format_float_positional(np.float32(x), unique=True, trim="-")


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv, "BERT run (converted, pretrained or fine-tuned)")
    common.checkpoint_flags(fv)
    common.batch_size_flag(fv, 32, "Texts")
    common.mesh_flag(fv)
    flags.DEFINE_multi_string("text", None, "A text to embed (repeatable).", flag_values=fv)
    flags.DEFINE_enum(
        "pooling", None, list(POOLINGS), "How the hidden states become one vector: the mean "
        "over the real tokens, or [CLS]'s. Default: the workdir's embedding.json (a converted "
        "sentence-transformers model), else mean.", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_boolean("json", False, "One JSON list (or object, with --query) per line.",
                         flag_values=fv)  # fmt: skip
    flags.DEFINE_string("out", None, "Write the embeddings to this .npy file (float32 [lines, "
                        "dimension]) instead of standard output.", flag_values=fv)  # fmt: skip
    flags.DEFINE_string("query", None, "Rank the input lines by cosine similarity to this text.",
                        flag_values=fv)  # fmt: skip
    flags.DEFINE_integer("top_k", 0, "With --query: write the k most similar lines (0: all).",
                         flag_values=fv)  # fmt: skip


def _check_flags(fv: flags.FlagValues) -> None:
    common.at_least(fv.batch_size, 1, "batch_size")
    common.at_least(fv.top_k, 0, "top_k")
    if fv.out is not None and (fv.query is not None or fv.json):
        other = "--query" if fv.query is not None else "--json"
        raise ValueError(f"--out writes the embeddings to a file; it goes without {other}.")
    if fv.out is not None and not fv.out.endswith(".npy"):
        raise ValueError(f"--out={fv.out}: give a file name ending in .npy (numpy's format).")
    if fv.top_k and fv.query is None:
        raise ValueError("--top_k goes with --query (it keeps the k most similar lines).")
    if fv.query is not None:
        common.check_arguments([fv.query], "--query")


def embed(fv: flags.FlagValues, args: list[str]) -> int:
    _check_flags(fv)
    embedder = Embedder.from_checkpoint(fv.workdir, fv.step, pooling=fv.pooling, mesh=fv.mesh)
    texts, _ = common.texts_or_stdin(fv.text, "--text")
    if fv.query is not None:
        matches = embedder.rank(fv.query, texts, batch_size=fv.batch_size)
        if fv.top_k:
            matches = matches[: fv.top_k]
        if fv.json:
            lines = [json.dumps({"index": m.index, "score": round(m.score, 6), "text": m.text},
                                ensure_ascii=False) for m in matches]  # fmt: skip
        else:
            lines = [f"{m.score:.4f}\t{common.one_line(m.text)}" for m in matches]
        common.write_lines(lines)
        return 0
    if fv.out is not None:
        with open(fv.out, "wb") as out:  # Opened first: an unwritable path fails before the work.
            vectors = embedder.embed(texts, batch_size=fv.batch_size)
            np.save(out, vectors)
        print(f"{fv.out}: {vectors.shape[0]} embeddings of dimension {vectors.shape[1]}, float32 "
              f"({embedder.pooling} pooling, L2-normalised)")  # fmt: skip
        return 0
    vectors = embedder.embed(texts, batch_size=fv.batch_size)
    separator = ", " if fv.json else " "
    lines = [separator.join(map(number, row)) for row in vectors]
    common.write_lines([f"[{line}]" for line in lines] if fv.json else lines)
    return 0


COMMAND = common.Command("python -m transformer_jax embed", __doc__, define_flags, embed)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
