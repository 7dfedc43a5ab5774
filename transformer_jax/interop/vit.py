"""ViT (`ViTForImageClassification`, `ViTModel`) <-> the vision transformer.

The architectures agree: a patch convolution, a learned [CLS] token, learned positions over
[CLS] and the row-major patches, pre-LN blocks with a final LayerNorm, the erf GELU, a linear
head on the [CLS] output. The conv weight `[D, C, P, P]` becomes the `[P, P, C, D]` kernel.

Pixels: the project's models read pixels in [0, 1]; a Hugging Face ViT reads
`(pixels - mean) / std` with the per-channel mean and std of its `preprocessor_config.json`.
That affine map is folded into the patch projection (exact: the projection is linear), so the
imported model reads [0, 1] pixels like every other. Export writes the weights as they are with
a preprocessor that rescales by 1/255 and does not normalize.

`ViTModel`'s pooler (dense + tanh, unused by the classifier) is dropped; a `ViTModel` has no
classifier, so its head is left at its initial values (for fine-tuning with a new head).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from transformer_jax.interop.blocks import encoder_fields, encoder_layer, hf_encoder_fields
from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Dims, Row, dense, norm, read, repeat, reshaped, write
from transformer_jax.interop.tensors import Source
from transformer_jax.models.vit.config import VitConfig

ARCHITECTURES = ("ViTForImageClassification", "ViTModel")
PREFIXES = ("vit.", "")
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu"}  # fmt: skip
_EXPORTED = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}


def _pair(value: Any) -> tuple[int, int]:
    return (int(value[0]), int(value[1])) if isinstance(value, list | tuple) else (int(value),) * 2


def model_config(hf: dict[str, Any], where: str, num_classes: int | None = None) -> VitConfig:
    """The ViT config of a config.json; `num_classes` for a checkpoint without a classifier."""
    activation = hf.get("hidden_act", "gelu")
    if activation not in _ACTIVATIONS:
        raise ConversionError(
            f"{where}: hidden_act={activation!r} is not one of {sorted(_ACTIVATIONS)}."
        )
    height, width = _pair(hf.get("image_size", 224))
    patch = hf.get("patch_size", 16)
    if isinstance(patch, list | tuple):
        if patch[0] != patch[1]:
            raise ConversionError(
                f"{where}: patch_size={patch}: only square patches are expressible."
            )
        patch = patch[0]
    labels = hf.get("id2label") or {}
    return VitConfig(
        num_classes=int(num_classes or hf.get("num_labels") or len(labels) or 2),
        image_height=height,
        image_width=width,
        channels=int(hf.get("num_channels", 3)),
        patch_size=int(patch),
        **encoder_fields(hf, default_dropout=0.0),
        norm="pre",
        activation=_ACTIVATIONS[activation],
        pool="cls",
        position_embedding="learned",
        use_bias=bool(hf.get("qkv_bias", True)),
        layer_norm_eps=float(hf.get("layer_norm_eps", 1e-12)),
    )


def dims(cfg: VitConfig) -> Dims:
    tokens = 1 + cfg.grid[0] * cfg.grid[1]  # [CLS] and the patches.
    return {"d": cfg.d_model, "n": cfg.num_heads, "h": cfg.head_dim, "f": cfg.d_ff,
            "tokens": tokens, "one": 1, "classes": cfg.num_classes}  # fmt: skip


def body(cfg: VitConfig) -> list[Row]:
    """The encoder but its patch projection (under `vit.` in a full checkpoint)."""
    layer = encoder_layer(
        "attention.attention", "layernorm_before", "layernorm_after", keep_bias=cfg.use_bias
    )
    return [
        reshaped("cls_token", "embeddings.cls_token", ("one", "one", "d"), ("d",)),
        reshaped(
            "pos_embed", "embeddings.position_embeddings", ("one", "tokens", "d"), ("tokens", "d")
        ),
        *repeat(layer, "encoder/layers/{i}/", "encoder.layer.{i}.", cfg.num_layers),
        *norm("encoder/final_norm", "layernorm"),
    ]


CLASSIFIER = dense("head_kernel", "head_bias", "classifier", "d", "classes")
PATCH = "embeddings.patch_embeddings.projection"


def params_from_hf(
    source: Source,
    cfg: VitConfig,
    fresh: dict[str, np.ndarray],
    mean: np.ndarray,
    std: np.ndarray,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """(parameters by path, heads left at their initial values); `mean`/`std` `[C]` are the
    normalisation the checkpoint expects of [0, 1] pixels, folded into the patch projection."""
    d, p, c = cfg.d_model, cfg.patch_size, cfg.channels
    out = dict(fresh) | read(source, body(cfg), dims(cfg))
    kernel = source.get(f"{PATCH}.weight", (d, c, p, p)).transpose(2, 3, 1, 0)  # [P, P, C, D]
    bias = source.get(f"{PATCH}.bias", (d,))
    out["patch_kernel"] = kernel / std[None, None, :, None]
    out["patch_bias"] = bias - np.einsum("pqcd,c->d", kernel, mean / std)
    fresh_heads = []
    if source.has("classifier.weight"):
        out |= read(source, CLASSIFIER, dims(cfg))
    else:
        fresh_heads.append("classifier head")
    for name in ("pooler.dense.weight", "pooler.dense.bias"):
        if source.has(name):
            source.used.add(source.name(name))  # Dropped: the classifier never reads it.
    return out, fresh_heads


def check_exportable(cfg: VitConfig, where: str) -> None:
    if cfg.stem:
        raise ConversionError(
            f"{where}: stem_layers={cfg.stem_layers}, stem_full_res_layers="
            f"{cfg.stem_full_res_layers}; a Hugging Face ViT projects the pixels' patches "
            f"directly and has no convolutional stem."
        )
    for field, value, wanted in (
        ("norm", cfg.norm, "pre"),
        ("pool", cfg.pool, "cls"),
        ("position_embedding", cfg.position_embedding, "learned"),
    ):
        if value != wanted:
            raise ConversionError(
                f"{where}: {field}={value!r}; a Hugging Face ViT has {field}={wanted!r}."
            )
    if cfg.activation not in _EXPORTED:
        raise ConversionError(f"{where}: activation={cfg.activation!r} has no ViT hidden_act.")
    if cfg.image_height != cfg.image_width:
        raise ConversionError(
            f"{where}: images of {cfg.image_height}x{cfg.image_width}; a Hugging Face ViT "
            f"reads square images."
        )


def params_to_hf(flat: dict[str, np.ndarray], cfg: VitConfig) -> dict[str, np.ndarray]:
    """ViTForImageClassification's tensors (pixels rescaled to [0, 1], not normalized)."""
    rows = [row.prefixed("", "vit.") for row in body(cfg)] + CLASSIFIER
    out = write(flat, rows, dims(cfg))
    out[f"vit.{PATCH}.weight"] = np.ascontiguousarray(flat["patch_kernel"].transpose(3, 2, 0, 1))
    out[f"vit.{PATCH}.bias"] = flat["patch_bias"]
    return out


def config_to_hf(cfg: VitConfig) -> dict[str, Any]:
    return {
        "model_type": "vit",
        "architectures": ["ViTForImageClassification"],
        "image_size": cfg.image_height,
        "patch_size": cfg.patch_size,
        "num_channels": cfg.channels,
        **hf_encoder_fields(cfg),
        "hidden_act": _EXPORTED[cfg.activation],
        "layer_norm_eps": cfg.layer_norm_eps,
        "qkv_bias": cfg.use_bias,
        "id2label": {str(i): f"LABEL_{i}" for i in range(cfg.num_classes)},
        "label2id": {f"LABEL_{i}": i for i in range(cfg.num_classes)},
        "torch_dtype": "float32",
    }


def preprocessor_to_hf(cfg: VitConfig) -> dict[str, Any]:
    """A ViTImageProcessor config for the exported weights: [0, 1] pixels, no normalisation."""
    return {
        "image_processor_type": "ViTImageProcessor",
        "do_resize": True,
        "size": {"height": cfg.image_height, "width": cfg.image_width},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": False,
        "image_mean": [0.0] * cfg.channels,
        "image_std": [1.0] * cfg.channels,
    }


def normalisation(processor: dict[str, Any] | None, channels: int, where: str):
    """(mean, std) `[C]` a checkpoint expects of [0, 1] pixels, from preprocessor_config.json
    (missing: ViTImageProcessor's defaults, 0.5 and 0.5)."""
    processor = processor or {}
    if processor.get("do_normalize", True) is False:
        return np.zeros(channels, np.float32), np.ones(channels, np.float32)
    mean = np.broadcast_to(np.asarray(processor.get("image_mean", 0.5), np.float32), (channels,))
    std = np.broadcast_to(np.asarray(processor.get("image_std", 0.5), np.float32), (channels,))
    if processor.get("do_rescale", True) is False:
        raise ConversionError(
            f"{where}: do_rescale=false (the model reads 0-255 pixels); transformer_jax feeds "
            f"[0, 1] pixels and expresses only rescaled inputs."
        )
    return mean, std
