"""A Vision Transformer on Fashion-MNIST (Xiao et al. 2017): real images, a published baseline.

    apt-get install dataset-fashion-mnist      # the original IDX files (or set data.idx_dir)
    XLA_FLAGS="--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false" \
        python train.py --config=configs/vit_fashion_mnist.py --workdir=runs/fashion

60,000 training and 10,000 test images of 28x28 grayscale clothing in 10 classes; 5,000 of the
training images are held out (stratified) to pick checkpoints. At the end it prints the test
accuracy beside an RBF SVC and logistic regression on the same pixels. On a CPU, XLA_FLAGS
splits the cores into two devices that each take half of every batch on a thread of their
own: the small convolutions keep both cores busier that way (docs/vit.md#fashion-mnist).
"""

from configs.common import vit_base_config
from transformer_jax.data.images.idx import FASHION_MNIST_LABELS


def get_config():
    c = vit_base_config("cpu")

    c.data.source = "idx"  # data.idx_dir unset: /usr/share/datasets/fashion-mnist (Debian).
    c.data.idx_label_names = ",".join(FASHION_MNIST_LABELS)
    c.data.batch_size = 128
    c.data.eval_batch_size = 512
    c.data.random_shift = 1  # Up to 1 pixel: 2 held this small model back (docs/vit.md).
    c.data.random_flip = True  # Clothes are left-right symmetric enough (unlike digits).

    c.model.patch_size = 4  # A 7x7 grid ...
    c.model.stem_full_res_layers = 1  # ... read from a convolutional stem: 3x3, 48 channels,
    c.model.stem_layers = 2  # then two 3x3 stride-2 layers (48, 96 channels), 28 -> 14 -> 7,
    c.model.stem_channels = 48  # ... then a 1x1 projection to d_model (docs/vit.md).
    c.model.pool = "gap"  # The head reads the mean of the 49 outputs (no [CLS]).
    c.model.num_layers = 2  # Compute goes to the stem: two blocks on top of it.
    c.model.d_model = 96
    c.model.num_heads = 4
    c.model.d_ff = 192
    c.model.dropout_rate = 0.0  # It underfits at this length: train and validation agree.

    c.optimizer = "adamw"
    c.schedule = "cosine"
    c.learning_rate = 2e-3
    c.weight_decay = 0.05
    c.adam_b2 = 0.999
    c.adam_eps = 1e-8
    c.num_train_steps = 5000  # About 11.6 epochs: under 30 minutes on 2 cores (docs/vit.md).
    c.warmup_steps = 500
    c.grad_clip_norm = 1.0
    c.label_smoothing = 0.1
    c.test_time_flip = True  # Validation and test: the mean of each image's and its mirror's
    c.test_time_shift = 1  # ... each also moved by every offset of up to 1 pixel: 18 views.
    c.log_every = 100
    c.eval_every = 5000  # One validation, at the end: 18 views cost 9 times the mirror alone.
    c.checkpoint_every = 200
    c.keep_checkpoints = 5
    c.test_checkpoint = "average"
    c.test_average_last = 5
    c.baseline_max_train = 10_000
    return c
