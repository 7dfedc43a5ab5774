"""all-MiniLM-L6-v2, a real pretrained sentence encoder, fine-tuned on stdlib_packages.

    python benchmarks/minilm.py --workdir=runs/minilm      # fetch and convert (docs/interop.md)
    python train.py --config=configs/minilm_stdlib_classify.py --workdir=runs/minilm_stdlib

The task, split, steps and batch of configs/bert_stdlib_classify.py (which package of the
standard library is a documentation sentence from; five classes, modules split apart), started
from the converted MiniLM instead of the project's own pretraining run. The modules of the test
split are not in training, so what the head learns must carry over to other modules: the head
first learns alone as a regularised probe of MiniLM's features, then the body moves a little.
"""

from configs import bert_stdlib_classify
from configs.common import minilm_finetune


def get_config():
    c = minilm_finetune(bert_stdlib_classify.get_config())
    c.data.max_len = 64  # 1 in 110 sentences is longer; half the cost of 128.
    c.learning_rate = 2e-5  # The body's peak: a small step on 460 sentences.
    c.warmup_steps = 30  # Then linear decay to 0 at step 300.
    # LP-FT: the first 150 steps train the head alone, an L2-regularised linear probe on the
    # frozen features (head_l2 0.1 is a logistic regression's C of about 0.02 on 460
    # sentences); then the body joins over 30 steps.
    c.head_only_steps = 150
    c.head_lr_factor = 100.0  # The head's peak: 2e-3.
    c.head_l2 = 0.1
    return c
