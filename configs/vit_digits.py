"""A Vision Transformer on scikit-learn's 8x8 handwritten digits: the ViT main job.

    python train.py --config=configs/vit_digits.py --workdir=runs/vit
    python -m transformer_jax classify-image --workdir=runs/vit --test_images=3 \
        --attention_dir=runs/vit/attention

1,797 images of 10 digits shipped inside the scikit-learn wheel (no network), split by class
into 1,257 training, 180 validation and 360 test images. 2x2 patches (a 4x4 grid plus [CLS]), 4
pre-LN blocks of width 64, dropout 0.1; each training image shifted by up to one pixel. The
recorded runs took
<!--fig main_job_vit_digits.json:summary/seconds/min:min-->4 min 31 s<!--/fig--> to
<!--fig main_job_vit_digits.json:summary/seconds/max:min-->4 min 35 s<!--/fig--> on 2 cores. At
the end it prints the test accuracy of the mean of the last 20 checkpoints' parameters beside an
RBF SVC and logistic regression on the same pixels. Its measured figures for 3 seeds, and what
each part of the recipe adds, are in docs/vit.md.
"""

from configs.common import vit_base_config


def get_config():
    c = vit_base_config("cpu")  # 4 layers, d_model 64, 4 heads, 2x2 patches, no dropout.

    c.data.source = "digits"
    c.data.batch_size = 64
    c.model.dropout_rate = 0.1
    # Pixels each training image may move by in x and y. Rotations and scaling
    # (data.random_rotate, data.random_scale) lower the validation accuracy here.
    c.data.random_shift = 1

    c.num_train_steps = 6000  # About 300 epochs of the training digits.
    c.warmup_steps = 300
    c.lr_factor = 0.5  # Peak 3.6e-3 at step 300, then Noam's 1/sqrt(step) decay (8.1e-4 at end).
    c.grad_clip_norm = 1.0
    c.label_smoothing = 0.1
    c.log_every = 100
    c.eval_every = 500
    # The final test scores the mean of the last 20 checkpoints (steps 4,100-6,000): the 180
    # validation digits are almost all right from the middle of training on, too few to pick
    # one checkpoint by.
    c.checkpoint_every = 100
    c.keep_checkpoints = 20
    c.test_checkpoint = "average"
    c.test_average_last = 20
    return c
