"""Time converting a GPT-2-small-shaped checkpoint (124M parameters) in and out.

    python benchmarks/hf_conversion.py

Builds a random GPT2LMHeadModel checkpoint of GPT-2 small's shapes locally (config.json,
model.safetensors, a byte-level BPE tokenizer.json; nothing is downloaded), then times
`interop.from_hf` (read, check, map, write the workdir) and `to_hf` (load the workdir, map,
write safetensors), checks the round trip gives the same tensors, and writes
benchmarks/results/hf_conversion.json.
"""

from __future__ import annotations

import json
import pathlib
import resource
import tempfile
import time

import numpy as np
from safetensors.numpy import load_file, save_file

from transformer_jax import interop
from transformer_jax.interop import convert

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "hf_conversion.json"
GPT2_SMALL = {
    "model_type": "gpt2",
    "architectures": ["GPT2LMHeadModel"],
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "n_inner": None,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-5,
    "bos_token_id": 50256,
    "eos_token_id": 50256,
}


def gpt2_tensors(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Random tensors with GPT2LMHeadModel's names and shapes (Conv1D weights [in, out])."""
    rng = np.random.default_rng(seed)
    d, f, v, p = config["n_embd"], 4 * config["n_embd"], config["vocab_size"], config["n_positions"]

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    out = {
        "transformer.wte.weight": normal(v, d),
        "transformer.wpe.weight": normal(p, d),
        "transformer.ln_f.weight": 1 + normal(d),
        "transformer.ln_f.bias": normal(d),
    }
    for i in range(config["n_layer"]):
        h = f"transformer.h.{i}."
        shapes = {"ln_1.weight": (d,), "ln_1.bias": (d,), "ln_2.weight": (d,), "ln_2.bias": (d,),
                  "attn.c_attn.weight": (d, 3 * d), "attn.c_attn.bias": (3 * d,),
                  "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
                  "mlp.c_fc.weight": (d, f), "mlp.c_fc.bias": (f,),
                  "mlp.c_proj.weight": (f, d), "mlp.c_proj.bias": (d,)}  # fmt: skip
        out.update({h + name: normal(*shape) for name, shape in shapes.items()})
    return out


def byte_level_tokenizer(vocab_size: int) -> str:
    """A byte-level BPE tokenizer.json of `vocab_size` tokens, the last `<|endoftext|>`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - 1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = [json.__doc__ or "", time.__doc__ or "", np.__doc__ or ""] * 4
    tokenizer.train_from_iterator(text, trainer)
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer.to_str()


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        source = root / "gpt2-small"
        source.mkdir()
        tokenizer_json = byte_level_tokenizer(500)
        vocab = json.loads(tokenizer_json)
        size = len(vocab["model"]["vocab"]) + len(vocab["added_tokens"])
        config = GPT2_SMALL | {"vocab_size": 50257}
        tensors = gpt2_tensors(config)
        save_file(tensors, source / "model.safetensors", metadata={"format": "pt"})
        (source / "config.json").write_text(json.dumps(config))
        (source / "tokenizer.json").write_text(tokenizer_json)
        (source / "tokenizer_config.json").write_text(
            json.dumps({"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"})
        )
        parameters = sum(t.size for name, t in tensors.items())
        file_mb = (source / "model.safetensors").stat().st_size / 2**20

        start = time.perf_counter()
        converted = interop.from_hf(source, root / "workdir")
        import_s = time.perf_counter() - start
        start = time.perf_counter()
        convert.to_hf(root / "workdir", root / "exported")
        export_s = time.perf_counter() - start

        back = load_file(root / "exported" / "model.safetensors")
        d = config["n_embd"]
        differ = []
        for name, value in tensors.items():
            got = back[name]
            if name.endswith("attn.c_attn.bias"):  # The key bias is dropped (exported as 0).
                value = np.concatenate([value[:d], np.zeros(d, np.float32), value[2 * d :]])
            if not np.array_equal(got, value):
                differ.append(name)
        result = {
            "model": "GPT2LMHeadModel, GPT-2 small shapes (random weights)",
            "parameters": int(parameters),
            "safetensors_mib": round(file_mb, 1),
            "tokenizer_tokens": size,
            "from_hf_s": round(import_s, 2),
            "to_hf_s": round(export_s, 2),
            "round_trip_identical": not differ,
            "differing_tensors": differ,
            "dropped_key_bias_max": converted.dropped["key biases"],
            "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        }
    print(json.dumps(result, indent=1))
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
