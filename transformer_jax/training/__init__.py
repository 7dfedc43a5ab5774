"""Training any registered model on any task: state, optimizer, the jitted step, checkpoints,
logs and the loop. Nothing in `transformer_jax.inference` imports from here."""

from transformer_jax.training.loop import train_and_evaluate, validate_train_config

__all__ = ["train_and_evaluate", "validate_train_config"]
