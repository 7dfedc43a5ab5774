"""transformer_jax: the Transformer of "Attention Is All You Need" in JAX and Flax NNX."""
