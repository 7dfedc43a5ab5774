"""ViT tiny: seconds-long runs on the 8x8 digits for tests and smoke checks.

    python train.py --config=configs/vit_tiny.py --workdir=/tmp/vit_tiny

1 layer, d_model 32, 2x2 patches; 100 steps, enough for tests to see it learn above chance
(10%).
"""

from configs.common import vit_base_config


def get_config():
    c = vit_base_config("tiny")  # d_model 32, 2x2 patches.
    c.model.num_layers = 1  # One layer: configs/tiny.py says why.

    c.data.batch_size = 32
    c.data.eval_batch_size = 64

    c.num_train_steps = 100
    c.warmup_steps = 20
    c.lr_factor = 0.2  # Peak 7.9e-3 at step 20 (Noam: 0.2 x 32^-0.5 x 20^-0.5).
    c.log_every = 1  # Per-step losses (resume tests compare them).
    c.eval_every = 50
    c.checkpoint_every = 50
    c.keep_checkpoints = 2
    c.baselines = False  # The tests that want them turn them on.
    return c
