"""Convert weights between workdirs and other formats:
`python -m transformer_jax.convert --from_hf=DIR --workdir=OUT`.

    transformer-jax convert --from_hf=gpt2-folder --workdir=/tmp/gpt2
    transformer-jax convert --from_hf=Helsinki-NLP/opus-mt-en-de --workdir=/tmp/opus-en-de
    transformer-jax convert --workdir=/tmp/my_gpt --to_hf=my_gpt-hf

--from_hf reads a Hugging Face model folder (config.json, model.safetensors or its shards, the
tokenizer files) of GPT-2, BERT, ViT or Marian (OPUS-MT) and writes an ordinary workdir: the
front ends (generate, fill-mask, classify, classify-image, translate) load it, and
`--config.init_from` fine-tunes from it. A hub name (e.g. gpt2, Helsinki-NLP/opus-mt-en-de)
is downloaded when the hub is reachable: safetensors, configs and tokenizer files, never a
pickle. --to_hf writes a GPT, BERT or ViT
workdir as a Hugging Face folder that `transformers` loads. Pickles (pytorch_model.bin) are
never read. See docs/interop.md.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from transformer_jax import interop
from transformer_jax.cli import common
from transformer_jax.interop import convert
from transformer_jax.storage import as_path

DOC = __doc__.split("\n\n", 2)[2]


def define(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "The workdir written (--from_hf) or read.", flag_values=fv)
    flags.DEFINE_string(
        "from_hf", None, "A Hugging Face model folder (or hub name) to import.", flag_values=fv
    )
    flags.DEFINE_string(
        "to_hf", None, "A new folder to write the workdir's model into, Hugging Face format.",
        flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_integer("step", None, "With --to_hf: the checkpoint step (default: latest).",
                         flag_values=fv)  # fmt: skip
    flags.DEFINE_integer(
        "num_classes", None, "With --from_hf of a ViTModel (no classifier): the classes of the "
        "new head.", flag_values=fv,
    )  # fmt: skip
    flags.mark_flag_as_required("workdir", flag_values=fv)


def _local_folder(name: str) -> str:
    """`name` if it is a folder; else a hub model downloaded (safetensors and configs only)."""
    if as_path(name).exists() or "://" in name or name.startswith((".", "/", "~")):
        return name
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise ValueError(
            f"--from_hf={name}: no such folder. To download a hub model by name install "
            f"huggingface_hub (pip install huggingface_hub); offline, pass the local folder."
        ) from None
    try:
        return snapshot_download(
            name,
            allow_patterns=["*.json", "*.safetensors", "*.txt", "*.spm", "*.model"],
        )
    except Exception as e:  # noqa: BLE001 - offline, unknown repo, gated model.
        raise ValueError(
            f"--from_hf={name}: not a local folder, and the hub download failed "
            f"({type(e).__name__}: {str(e)[:200]}). Offline, pass a local folder that holds "
            f"config.json and model.safetensors."
        ) from None


def body(fv: flags.FlagValues, args: list[str]) -> int:
    del args
    source, target = fv["from_hf"].value, fv["to_hf"].value
    if (source is None) == (target is None):
        raise ValueError("pass exactly one of --from_hf=DIR (import) or --to_hf=DIR (export).")
    start = time.time()
    if source is not None:
        converted = interop.from_hf(
            _local_folder(source), fv["workdir"].value, num_classes=fv["num_classes"].value
        )
        print(f"{source}: {converted.architecture} -> {fv['workdir'].value} "
              f"({converted.task}, {time.time() - start:.1f} s)")  # fmt: skip
        for what, value in converted.dropped.items():
            print(f"  dropped {what} (largest |value| {value:.3g}): they cancel in the softmax")
        for head in converted.fresh:
            print(f"  {head}: not in the checkpoint, newly initialised (fine-tune it)")
        return 0
    architecture = convert.to_hf(fv["workdir"].value, target, fv["step"].value)
    print(f"{fv['workdir'].value} -> {target}: {architecture} ({time.time() - start:.1f} s)")
    return 0


COMMAND = common.Command(
    "python -m transformer_jax.convert", DOC, define, body,
    usage_flags="--from_hf=DIR --workdir=OUT | --workdir=DIR --to_hf=OUT",
)  # fmt: skip
main = COMMAND.run

if __name__ == "__main__":
    sys.exit(main())
