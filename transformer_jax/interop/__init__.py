"""Weights in and out: Hugging Face checkpoints (safetensors) to workdirs and back.

    from transformer_jax import interop
    interop.from_hf("gpt2-folder", "/tmp/gpt2")       # GPT-2, BERT, ViT, Marian (OPUS-MT)
    interop.to_hf("/tmp/my_gpt", "my_gpt-hf")         # GPT, BERT and ViT workdirs
    from transformer_jax.interop import ctranslate2    # translation workdirs -> CTranslate2
    ctranslate2.to_ctranslate2("/tmp/en-de", "serving/en-de")

See docs/interop.md. Files are read and written with `safetensors`; pickles are never loaded.
"""

from transformer_jax.interop.convert import Converted, from_hf, read_hf, to_hf, write_workdir
from transformer_jax.interop.files import ConversionError

__all__ = ["ConversionError", "Converted", "from_hf", "read_hf", "to_hf", "write_workdir"]
