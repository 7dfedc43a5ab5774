"""all-MiniLM-L6-v2, a real pretrained sentence encoder, fine-tuned on numbers_pair.

    python benchmarks/minilm.py --workdir=runs/minilm      # fetch and convert (docs/interop.md)
    python train.py --config=configs/minilm_numbers_pair.py --workdir=runs/minilm_numbers

The task, split, steps and batch of configs/bert_numbers_pair.py ("is B the French for the
number A says?"), started from the converted MiniLM (English only) instead of the project's
bilingual pretraining run.
"""

from configs import bert_numbers_pair
from configs.common import minilm_finetune


def get_config():
    c = minilm_finetune(bert_numbers_pair.get_config())
    c.warmup_steps = 30  # Then linear decay to 0 at the last step.
    return c
