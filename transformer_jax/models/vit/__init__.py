"""The Vision Transformer (ViT) classifier, its config and the ViT-B/16 preset."""

from transformer_jax.models.vit.config import VitConfig
from transformer_jax.models.vit.model import VisionTransformer

__all__ = ["VisionTransformer", "VitConfig"]
