"""all-MiniLM-L6-v2, a real pretrained sentence encoder, fine-tuned on stdlib_packages.

    python benchmarks/minilm.py --workdir=runs/minilm      # fetch and convert (docs/interop.md)
    python train.py --config=configs/minilm_stdlib_classify.py --workdir=runs/minilm_stdlib

The task, split, steps and batch of configs/bert_stdlib_classify.py (which package of the
standard library is a documentation sentence from; five classes, modules split apart), started
from the converted MiniLM instead of the project's own pretraining run.
"""

from configs import bert_stdlib_classify
from configs.common import minilm_finetune


def get_config():
    c = minilm_finetune(bert_stdlib_classify.get_config())
    c.warmup_steps = 30  # Then linear decay to 0 at step 300.
    return c
