"""Inference: model-free search loops, decoding with a model, and the front ends `Translator`,
`Generator`, `MaskFiller` (BERT fill-mask), `Classifier` (fine-tuned BERT), `Embedder`
(sentence embeddings from any BERT) and `ImageClassifier` (ViT, with attention maps over the
patches).

Imports nothing from `transformer_jax.training`: a front end loads its run through
`transformer_jax.runs.load_run`.
"""

from transformer_jax.inference.classifier import Classifier, Prediction
from transformer_jax.inference.decoding import beam_search, greedy_decode, sample
from transformer_jax.inference.embedder import Embedder, Match
from transformer_jax.inference.fill_mask import Candidate, MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.patch_attention import PatchAttention, attention_rollout
from transformer_jax.inference.search import length_penalty
from transformer_jax.inference.translator import AttentionResult, Translator

__all__ = [
    "AttentionResult",
    "Candidate",
    "Classifier",
    "Embedder",
    "Generator",
    "ImageClassifier",
    "MaskFiller",
    "Match",
    "PatchAttention",
    "Prediction",
    "Translator",
    "attention_rollout",
    "beam_search",
    "greedy_decode",
    "length_penalty",
    "sample",
]
