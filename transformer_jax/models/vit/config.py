"""The Vision Transformer's hyper-parameters (Dosovitskiy et al. 2020), with the ViT-B/16 preset.

An image is cut into P x P patches, each flattened and linearly projected (optionally after a
stem of 3x3 convolutions, the paper's hybrid in the form of Xiao et al. 2021), a learned
`[CLS]` token is prepended (or the patch outputs are averaged), position embeddings are added,
and a stack of pre-LN encoder blocks with exact GELU reads the sequence; a final LayerNorm and
a linear head classify. `vit_b16` is ViT-B/16 (12 layers, d 768, 12 heads, d_ff 3072, 16x16
patches of 224x224 RGB images, 1,000 classes: about 86M parameters); `cpu` is sized for small
images on a laptop (8x8 digits, 32x32 CIFAR); `tiny` is for tests.
"""

from __future__ import annotations

import dataclasses

from transformer_jax.models.fields import TINY, TransformerFields, check_transformer_fields
from transformer_jax.nn.conv_stem import stem_layout
from transformer_jax.nn.patches import check_patch_grid

POOLS = ("cls", "gap")  # Classify the [CLS] output, or the mean of the patch outputs.
POSITION_EMBEDDINGS = ("learned", "sincos2d", "none")  # "none": a bag of patches (for tests).


@dataclasses.dataclass(frozen=True)
class VitConfig(TransformerFields):
    """Shape and behaviour of the ViT classifier; validated on construction."""

    num_classes: int = 1000  # Classes of the head (from the data).
    image_height: int = 224  # Input images' height in pixels (from the data).
    image_width: int = 224  # Input images' width in pixels (from the data).
    channels: int = 3  # Input images' channels: 1 grayscale, 3 RGB (from the data).
    patch_size: int = 16  # P: square patches of P x P pixels; must tile height and width.
    stem_layers: int = 0  # k 3x3 stride-2 convolutions (ReLU) before patches of P / 2^k.
    stem_channels: int = 32  # The first stem layer's output channels, doubled at each layer.
    stem_full_res_layers: int = 0  # 3x3 stride-1 convolutions (ReLU) before those of the stem.
    num_layers: int = 12  # Encoder blocks.
    d_model: int = 768  # Hidden size D (patch projection width).
    num_heads: int = 12  # Attention heads; head dim = d_model / num_heads.
    d_ff: int = 3072  # MLP inner width (4 D).
    dropout_rate: float = 0.0  # On embeddings and sublayer outputs (ViT on ImageNet-21k: 0.1).
    attention_dropout_rate: float = 0.0  # On attention weights.
    norm: str = "pre"  # ViT normalises before each sublayer ("pre"), then once at the end.
    activation: str = "gelu"  # Exact (erf) GELU as in ViT; "gelu_tanh", "relu" or "silu".
    pool: str = "cls"  # "cls": a learned [CLS] token's output; "gap": mean of patch outputs.
    position_embedding: str = "learned"  # "learned", fixed "sincos2d", or "none".
    use_bias: bool = True  # Biases in attention projections (keys never have one).
    layer_norm_eps: float = 1e-6  # LayerNorm epsilon.
    dtype: str = "float32"  # Computation dtype: "float32" or "bfloat16"; parameters stay float32.
    attention_kernel: str = "auto"  # "auto" (per device), "reference", "xla", "cudnn", "splash".
    scan_layers: bool = False  # Run the layers as one lax.scan: one block compiled, any depth.
    remat: str = "none"  # Backward pass recomputes: "none", "full" (least memory) or "dots".

    def __post_init__(self):
        check_transformer_fields(
            self,
            positive=(
                "num_classes",
                "image_height",
                "image_width",
                "channels",
                "patch_size",
                "num_layers",
                "d_model",
                "num_heads",
                "d_ff",
            ),
        )
        for field, allowed in (("pool", POOLS), ("position_embedding", POSITION_EMBEDDINGS)):
            if getattr(self, field) not in allowed:
                raise ValueError(f"VitConfig.{field}={getattr(self, field)!r} is not in {allowed}.")
        try:
            check_patch_grid(self.image_height, self.image_width, self.patch_size)
        except ValueError as e:
            raise ValueError(f"VitConfig.patch_size: {e}") from None
        if self.stem_layers < 0 or self.stem_full_res_layers < 0 or self.stem_channels <= 0:
            raise ValueError(
                f"VitConfig: stem_layers={self.stem_layers} and stem_full_res_layers="
                f"{self.stem_full_res_layers} must be >= 0 and stem_channels="
                f"{self.stem_channels} positive."
            )
        if self.patch_size % 2**self.stem_layers:
            raise ValueError(
                f"VitConfig.stem_layers={self.stem_layers} halves the image {self.stem_layers} "
                f"times, so patch_size={self.patch_size} must be a multiple of "
                f"{2**self.stem_layers}; use at most {_halvings(self.patch_size)} stem layers."
            )
        if self.position_embedding == "sincos2d" and self.d_model % 4:
            raise ValueError(
                f"VitConfig.d_model={self.d_model} must be divisible by 4 for sincos2d positions."
            )

    @property
    def stem(self) -> list[tuple[int, int]]:
        """(output channels, stride) of each stem layer, in order (empty: no stem)."""
        return stem_layout(self.stem_full_res_layers, self.stem_layers, self.stem_channels)

    @property
    def stem_patch(self) -> int:
        """Side of the patches the projection reads from the stem's output (P / 2^k)."""
        return self.patch_size // 2**self.stem_layers

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, columns) of the patch grid."""
        return self.image_height // self.patch_size, self.image_width // self.patch_size

    @property
    def num_patches(self) -> int:
        rows, cols = self.grid
        return rows * cols

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of the images the model reads."""
        return self.image_height, self.image_width, self.channels

    PRESETS = ("vit_b16", "cpu", "tiny")  # Class methods giving named sizes.

    @classmethod
    def vit_b16(cls, **overrides) -> VitConfig:
        """ViT-B/16 at 224x224, 1,000 classes: 12 layers, d 768, 12 heads (about 86M)."""
        return cls(**overrides)

    @classmethod
    def cpu(cls, **overrides) -> VitConfig:
        """4 layers, d 64, 2x2 patches of 8x8 grayscale images: minutes on a 2-core CPU.

        On the 1,257 training digits this size learned faster and generalised better than 6
        layers of width 128 (docs/vit.md).
        """
        fields = dict(
            image_height=8,
            image_width=8,
            channels=1,
            num_classes=10,
            patch_size=2,
            num_layers=4,
            d_model=64,
            num_heads=4,
            d_ff=256,
        )
        return cls(**{**fields, **overrides})

    @classmethod
    def tiny(cls, **overrides) -> VitConfig:
        """2 layers, d 32, no dropout, 8x8 grayscale, 2x2 patches: for tests."""
        fields = {k: v for k, v in TINY.items() if k != "max_len"}
        fields |= dict(image_height=8, image_width=8, channels=1, num_classes=10, patch_size=2)
        return cls(**{**fields, "num_layers": 2, **overrides})


def _halvings(n: int) -> int:
    """How many times `n` can be halved exactly."""
    return (n & -n).bit_length() - 1
