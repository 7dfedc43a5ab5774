"""Measures the input pipeline alone on the embedded corpus: set-up costs and batch throughput.

    python benchmarks/input_pipeline.py            # pinned to one CPU core, ~1 minute
    python benchmarks/input_pipeline.py --cpus 0   # all cores

Prints a table and writes benchmarks/results/input_pipeline.json. Throughput counts real target
tokens (weights == 1) and pairs per second that the training loop receives from the iterator
(grain, prefetching in threads), for bucketed and packed batches at two token budgets; "direct"
rows build batches in the calling thread without grain, for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from transformer_jax.data.translation import (  # noqa: E402
    TrainIterator,
    default_data_config,
    embedded_pairs,
    load_tokenizer_or_train,
    make_train_iterator,
    tokenized_split,
)


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def _throughput(next_batch, num_batches: int, pack: bool) -> dict:
    for _ in range(3):  # Warm-up: threads started, first batches buffered.
        next_batch()
    pairs = tokens = src_tokens = padded = src_padded = 0
    start = time.perf_counter()
    for _ in range(num_batches):
        batch = next_batch()
        weights = batch["weights"]
        tokens += int(weights.sum())
        padded += weights.size
        src_tokens += int(np.count_nonzero(batch["src"]))
        src_padded += batch["src"].size
        if pack:
            pairs += int(batch["tgt_segment_ids"].max(axis=1).sum())
        else:
            pairs += int(weights.any(axis=1).sum())
    seconds = time.perf_counter() - start
    return {
        "batches": num_batches,
        "seconds": round(seconds, 3),
        "examples_per_s": round(pairs / seconds),
        "target_tokens_per_s": round(tokens / seconds),
        "target_fill": round(tokens / padded, 3),
        "source_fill": round(src_tokens / src_padded, 3),
    }


def used_shapes(iterator: TrainIterator) -> list[tuple[int, int]]:
    """The (rows, length) shapes that occur in an epoch (buckets with pairs)."""
    counts = iterator.batches_per_bucket or (1,)
    return [(r, n) for r, n, c in zip(iterator.rows, iterator.lengths, counts, strict=True) if c]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="Default: a fresh temporary directory.")
    parser.add_argument("--train_size", type=int, default=200_000)
    parser.add_argument("--num_batches", type=int, default=300)
    parser.add_argument("--cpus", type=int, default=1, help="Pin to this many cores; 0 = all.")
    parser.add_argument(
        "--out", default=str(pathlib.Path(__file__).parent / "results" / "input_pipeline.json")
    )
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="input_pipeline_"))

    cfg = default_data_config()
    cfg.embedded_train_size = args.train_size
    setup = {}
    _, setup["generate_corpus_s"] = _timed(
        lambda: embedded_pairs(
            "train",
            cfg.embedded_train_size,
            cfg.embedded_seed,
            cfg.embedded_target_lang,
            cache_dir=workdir / "cache",
        )
    )
    tokenizer, setup["train_tokenizer_s"] = _timed(lambda: load_tokenizer_or_train(cfg, workdir))
    _, setup["tokenize_train_s"] = _timed(
        lambda: tokenized_split(cfg, tokenizer, "train", workdir, 0, 1)
    )
    _, setup["load_cached_tokens_s"] = _timed(
        lambda: tokenized_split(cfg, tokenizer, "train", workdir, 0, 1)
    )
    setup = {k: round(v, 3) for k, v in setup.items()}

    results = []
    for tokens_per_batch in (4_096, 25_000):
        for pack in (False, True):
            cfg.tokens_per_batch, cfg.pack = tokens_per_batch, pack
            iterator, build_s = _timed(
                lambda: make_train_iterator(
                    cfg, tokenizer, workdir, process_index=0, process_count=1
                )
            )
            row = {
                "mode": "packed" if pack else "bucketed",
                "via": "grain",
                "tokens_per_batch": tokens_per_batch,
                "iterator_setup_s": round(build_s, 3),
                "shapes": used_shapes(iterator),
            }
            results.append(
                {**row, **_throughput(lambda it=iterator: next(it), args.num_batches, pack)}
            )
            source = iterator.epoch_batches(0)
            counter = iter(range(10**9))
            results.append(
                {
                    **row,
                    "via": "direct",
                    **_throughput(
                        lambda s=source, c=counter: s[next(c) % len(s)], args.num_batches, pack
                    ),
                }
            )

    report = {
        "machine": f"{platform.processor() or platform.machine()}, "
        f"{len(os.sched_getaffinity(0))} core(s) used of {os.cpu_count()}",
        "python": platform.python_version(),
        "train_pairs": args.train_size,
        "max_len": cfg.max_len,
        "vocab_size": tokenizer.vocab_size,
        "setup": setup,
        "throughput": results,
    }
    print(f"machine: {report['machine']}; {args.train_size} pairs; vocab {tokenizer.vocab_size}")
    print("set-up: " + ", ".join(f"{k} {v:.2f}" for k, v in setup.items()))
    header = (
        f"{'mode':9} {'via':6} {'budget':>6} {'examples/s':>11} {'tgt tokens/s':>13} "
        f"{'fill src/tgt':>12}  shapes (rows, length)"
    )
    print(header + "\n" + "-" * len(header))
    for r in results:
        print(
            f"{r['mode']:9} {r['via']:6} {r['tokens_per_batch']:>6} {r['examples_per_s']:>11,} "
            f"{r['target_tokens_per_s']:>13,} {r['source_fill']:>6.2f}/{r['target_fill']:.2f}"
            f"  {r['shapes']}"
        )
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
