"""Which settings fit the paper-sized models on TPU slices and 8 H100s, compiled on this CPU.

    python benchmarks/aot_targets.py                      # every model x every target
    python benchmarks/aot_targets.py --models=base --targets=v5e-8,h100x8

For each model at its paper's batch (translation base and big at about 25k tokens per side,
GPT-2 small at 512 x 1,024 tokens, BERT-base at 256 x 512, ViT-B/16 at 4,096 images of
224x224) and each target, `transformer_jax.aot.fit_config` compiles the train step in bfloat16
under settings that spread or shrink it more and more (data parallel, fsdp, remat,
micro-batches) until one fits the chip's memory. It records the first that fits, the memory per
chip, the FLOPs per step and the roofline bound. Needs the `aot` extra (TPU targets) and the
`gpu-aot` extra (GPU targets). Writes JSON (default benchmarks/results/aot_targets.json) and
prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # The targets are compile-only devices.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # for configs/

from configs import (  # noqa: E402
    bert_stdlib_pretrain,
    gpt_stdlib,
    vit_digits,
    wmt14_en_de_base,
    wmt14_en_de_big,
)
from transformer_jax import models  # noqa: E402
from transformer_jax.aot import OutOfMemoryError, fit_config, report  # noqa: E402

TARGETS = ("v5e-8", "v4-8", "v5p-8", "v6e-8", "h100x8")


def paper_configs() -> dict:
    """Each model at its paper's training batch, in bfloat16."""
    base, big = wmt14_en_de_base.get_config(), wmt14_en_de_big.get_config()

    gpt = gpt_stdlib.get_config()  # GPT-2 small (Radford et al. 2019): 512 x 1,024 tokens.
    # Pretraining without dropout, as nanoGPT and llm.c do: attention runs as a fused kernel.
    gpt.model = models.config_section(
        "decoder_only", "gpt2_small", dropout_rate=0.0, attention_dropout_rate=0.0
    )
    gpt.data.max_len, gpt.data.tokens_per_batch, gpt.data.vocab_size = 1024, 512 * 1024, 50257

    bert = bert_stdlib_pretrain.get_config()  # BERT-base (Devlin et al. 2019): 256 x 512.
    # Dropout 0.1 on the residuals, none on the attention weights (MosaicBERT's pretraining).
    bert.model = models.config_section("encoder_only", "bert_base", attention_dropout_rate=0.0)
    bert.data.max_len, bert.data.tokens_per_batch, bert.data.vocab_size = 512, 256 * 512, 30522

    vit = vit_digits.get_config()  # ViT-B/16 (Dosovitskiy et al. 2021): 4,096 images.
    vit.model = models.config_section("vit", "vit_b16")
    vit.data.source, vit.data.tfds_name = "tfds", "imagenet2012"
    vit.model.image_height = vit.model.image_width = 224
    vit.model.channels, vit.model.num_classes = 3, 1000
    vit.data.batch_size = 4096

    configs = {"base": base, "big": big, "gpt2_small": gpt, "bert_base": bert, "vit_b16": vit}
    for config in configs.values():
        config.model.dtype = "bfloat16"
    return configs


def measure(name: str, config, target: str) -> dict:
    started = time.perf_counter()
    try:
        setting, overrides, result = fit_config(config, target)
    except OutOfMemoryError as e:
        return {"model": name, "target": target, "fits": None, "error": str(e)}
    train = result.results[0]
    terms = report.roofline(train, result.target)
    return {
        "model": name,
        "target": target,
        "fits": setting,
        "overrides": overrides,
        "mesh": dict(result.plan.mesh.shape),
        "params": result.plan.param_count,
        "param_bytes": result.plan.param_bytes,
        "optimizer_bytes": result.plan.optimizer_bytes,
        "total_bytes": train.total_bytes,
        "hbm_bytes": result.target.chip.hbm_bytes,
        "flops_per_device": train.flops,
        "flops_estimated": train.cost_estimated,
        "loops": train.loops,
        "items": train.items,
        "unit": train.unit,
        "flop_s": terms.flop_s,
        "bound_s": terms.bound_s,  # On TPUs the HBM term is the bytes by the layouts.
        "accessed_s": terms.accessed_s,  # The cost analysis' bytes accessed (every memory).
        "hbm_bytes_placed": train.hbm_estimate_bytes,
        "attention": train.attention,
        "compile_s": train.compile_s,
        "search_s": time.perf_counter() - started,
    }


def shown(r: dict) -> dict:
    """A result's figures in the units the tables show (stored with it as `shown`)."""
    accessed = r.get("accessed_s")
    return {
        "total_gib": r["total_bytes"] / 2**30,
        "hbm_gib": r["hbm_bytes"] / 2**30,
        "bound_ms": r["bound_s"] * 1e3,
        "accessed_ms": None if accessed is None else accessed * 1e3,
    }


def row(r: dict) -> str:
    if r["fits"] is None:
        return f"| {r['model']} | {r['target']} | nothing tried fits | | | | |"
    flops, v = r["flops_per_device"], shown(r)
    mark = (">=" if r["loops"] else "") + ("~" if r["flops_estimated"] else "")
    every = "" if v["accessed_ms"] is None else f"{mark}{v['accessed_ms']:.0f} ms"
    return (
        f"| {r['model']} | {r['target']} | {r['fits']} | "
        f"{v['total_gib']:.1f} of {v['hbm_gib']:.0f} GiB | "
        f"{mark}{flops:.3g} | {mark}{v['bound_ms']:.0f} ms | {every} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="base,big,gpt2_small,bert_base,vit_b16")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--out", default="benchmarks/results/aot_targets.json")
    parser.add_argument(
        "--table",
        action="store_true",
        help="Compile nothing: derive the saved results' figures (`shown`), save and print them.",
    )
    args = parser.parse_args()
    configs = paper_configs()
    out = pathlib.Path(args.out)
    # A rerun of some models and targets replaces their rows and keeps the others.
    results = json.loads(out.read_text()) if out.exists() else []
    for name in [] if args.table else args.models.split(","):
        for target in args.targets.split(","):
            print(f"{name} on {target} ...", file=sys.stderr, flush=True)
            r = measure(name, configs[name], target)
            if r["fits"] is not None:
                r["shown"] = shown(r)
            results = [x for x in results if (x["model"], x["target"]) != (name, target)] + [r]
            print(row(r), flush=True)
            out.write_text(json.dumps(results, indent=1) + "\n")  # kept as it goes
    if args.table:
        results = [r if r["fits"] is None else r | {"shown": shown(r)} for r in results]
        out.write_text(json.dumps(results, indent=1) + "\n")
    print(
        "\n| model | target | fits with | memory per chip | FLOPs per step per chip | bound | "
        "all memories |\n|---|---|---|---|---|---|---|"
    )
    for r in results:
        print(row(r))


if __name__ == "__main__":
    main()
