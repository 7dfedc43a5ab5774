"""Convert weights between workdirs and other formats:
`python -m transformer_jax convert --from_hf=DIR --workdir=OUT`.

    transformer-jax convert --from_hf=gpt2-folder --workdir=/tmp/gpt2
    transformer-jax convert --from_hf=Helsinki-NLP/opus-mt-en-de --workdir=/tmp/opus-en-de
    transformer-jax convert --workdir=/tmp/my_gpt --to_hf=my_gpt-hf
    transformer-jax convert --workdir=/tmp/opus-en-de --to_ctranslate2=en-de-ct2 --quantization=int8

--from_hf reads a Hugging Face model folder (config.json, model.safetensors or its shards, the
tokenizer files) of GPT-2, BERT, ViT or Marian (OPUS-MT) and writes an ordinary workdir: the
front ends (generate, fill-mask, classify, classify-image, translate, embed) load it, and
`--config.init_from` fine-tunes from it. A sentence-transformers folder of a BERT (modules.json,
1_Pooling/, e.g. all-MiniLM-L6-v2) is read too: its pooling and longest input are recorded
for `embed`. A hub name (e.g. gpt2, Helsinki-NLP/opus-mt-en-de) is downloaded when the hub is
reachable and the `hf` extra is installed (`pip install -e ".[hf]"`): safetensors, configs and
tokenizer files, never a pickle. --to_hf writes a GPT, BERT or ViT workdir as a Hugging Face
folder that `transformers` loads. --to_ctranslate2 writes a translation workdir (trained here
or converted from OPUS-MT) as a CTranslate2 model directory with its vocabulary and tokenizer,
which `ctranslate2.Translator` serves (needs `pip install "transformer_jax[ctranslate2]"`).
Pickles (pytorch_model.bin) are never read. See docs/interop.md.
"""

from __future__ import annotations

import sys
import time

from absl import flags

from transformer_jax import interop
from transformer_jax.cli import common
from transformer_jax.interop import convert, ctranslate2
from transformer_jax.storage import as_path

DOC = __doc__.split("\n\n", 2)[2]
MODES = ("from_hf", "to_hf", "to_ctranslate2")  # Exactly one is given.


def define(fv: flags.FlagValues) -> None:
    flags.DEFINE_string("workdir", None, "The workdir written (--from_hf) or read.", flag_values=fv)
    flags.DEFINE_string(
        "from_hf", None, "A Hugging Face model folder (or hub name) to import.", flag_values=fv
    )
    flags.DEFINE_string(
        "to_hf", None, "A new folder to write the workdir's model into, Hugging Face format.",
        flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_string(
        "to_ctranslate2", None, "A new directory to write the translation workdir's model into, "
        "CTranslate2 format.", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_string(
        "quantization", None, "With --to_ctranslate2: CTranslate2's weight type, e.g. int8, "
        "int8_float16, float16, bfloat16 (default: float32).", flag_values=fv,
    )  # fmt: skip
    flags.DEFINE_integer("step", None, "With --to_hf or --to_ctranslate2: the checkpoint step "
                         "(default: latest).", flag_values=fv)  # fmt: skip
    flags.DEFINE_integer("average_last", 0, "With --to_ctranslate2: export the mean of the last "
                         "N checkpoints up to --step (paper §6.1: 5).", flag_values=fv)  # fmt: skip
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
            f"--from_hf={name}: no such folder. A hub model is downloaded by name with the hf "
            f'extra: pip install -e ".[hf]" (or pass a local folder).'
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
    modes = [name for name in MODES if fv[name].value is not None]
    if len(modes) != 1:
        raise ValueError(
            "pass exactly one of --from_hf=DIR (import), --to_hf=DIR or --to_ctranslate2=DIR "
            f"(export); got {['--' + m for m in modes] or 'none'}."
        )
    for flag, default in (("quantization", None), ("average_last", 0)):
        if fv[flag].value != default and modes != ["to_ctranslate2"]:
            raise ValueError(f"--{flag} goes with --to_ctranslate2 only.")
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
        if converted.embedding is not None:
            print(f"  sentence embeddings: {converted.embedding.pooling} pooling, inputs cut "
                  f"at {converted.embedding.max_len} tokens, L2-normalised (embedding.json; "
                  f"transformer-jax embed)")  # fmt: skip
        return 0
    if modes == ["to_ctranslate2"]:
        exported = ctranslate2.to_ctranslate2(
            fv["workdir"].value, fv["to_ctranslate2"].value, step=fv["step"].value,
            average_last=fv["average_last"].value, quantization=fv["quantization"].value,
        )  # fmt: skip
        tokens = ", ".join(
            f"{k.removesuffix('_token')} {v}" for k, v in exported.special_tokens.items()
        )
        print(f"{fv['workdir'].value} -> {exported.path}: CTranslate2 {exported.quantization}, "
              f"steps {list(exported.steps)} ({time.time() - start:.1f} s)")  # fmt: skip
        print(f"  tokens: {tokens}; tokenizer: {exported.tokenizer}")
        return 0
    architecture = convert.to_hf(fv["workdir"].value, target, fv["step"].value)
    print(f"{fv['workdir'].value} -> {target}: {architecture} ({time.time() - start:.1f} s)")
    return 0


COMMAND = common.Command(
    "python -m transformer_jax convert", DOC, define, body,
    usage_flags="--from_hf=DIR --workdir=OUT | --workdir=DIR --to_hf=OUT | "
                "--workdir=DIR --to_ctranslate2=OUT",
)  # fmt: skip
main = COMMAND.run

if __name__ == "__main__":
    sys.exit(main())
