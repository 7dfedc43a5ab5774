"""Moved to `transformer_jax.runs` (the layout: `runs.layout`; the model hash: `runs.identity`).
The old names still import, with a warning, until the next release."""

from transformer_jax.deprecation import deprecated_names

__getattr__ = deprecated_names(
    __name__,
    {
        **{
            name: f"transformer_jax.runs.layout.{name}"
            for name in (
                "CheckpointError",
                "ForeignCheckpointError",
                "LEGACY_MODEL",
                "LEGACY_TASK",
                "RunIdentity",
                "Workdir",
                "migrate",
            )
        },
        "model_hash": "transformer_jax.runs.identity.model_hash",
    },
)
