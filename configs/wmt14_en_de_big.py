"""WMT'14 English -> German, Transformer big (Table 3): 300k steps (§5.2).

    python train.py --config=configs/wmt14_en_de_big.py --workdir=gs://BUCKET/runs/big \
        --config.data.tfds_data_dir=gs://BUCKET/tfds

The paper reports 28.4 BLEU on newstest2014. bfloat16 computation is on (parameters stay
float32); with many hosts add FSDP, e.g. on 32 chips `--config.mesh.fsdp=8 --config.mesh.data=-1`
(rows become multiples of data x fsdp by themselves; docs/tpu.md has the multi-host command).

The mesh as given (data parallel over every chip) fits a v5e-8, 16 GiB per chip: the train step
needs <!--fig aot_targets.json:6/shown/total_gib:.1f-->4.8<!--/fig--> GiB per chip, checked
without a TPU by `python -m transformer_jax compile --config=configs/wmt14_en_de_big.py
--target=v5e-8`.
"""

from configs.wmt14_en_de_base import get_config as base
from transformer_jax import models


def get_config():
    c = base()
    c.model = models.config_section("encoder_decoder", "big")  # Table 3 "big".
    c.model.dtype = "bfloat16"  # Computation in bfloat16; parameters and Adam stay float32.
    c.num_train_steps = 300_000
    return c
