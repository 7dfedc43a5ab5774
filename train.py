"""Train a model: `python train.py --config=configs/NAME.py --workdir=DIR [--config.k=v]`.

With no --config it uses configs/default.py (the offline number-translation corpus).
Re-running the same command resumes from DIR's latest checkpoint. The command itself is
`transformer_jax.cli.train` (also `transformer-jax train`, `python -m transformer_jax train`).
"""

from transformer_jax.cli.train import run

if __name__ == "__main__":
    run()
