"""WMT'14 English -> German, Transformer big (Table 3): 300k steps (§5.2).

    python train.py --config=configs/wmt14_en_de_big.py --workdir=gs://BUCKET/runs/big \
        --config.data.tfds_data_dir=gs://BUCKET/tensorflow_datasets

The paper reports 28.4 BLEU on newstest2014. bfloat16 computation is on (parameters stay
float32); with many hosts add FSDP, e.g. `--config.mesh.fsdp=8 --config.mesh.data=-1`.
"""

from configs.wmt14_en_de_base import get_config as base


def get_config():
    c = base()
    c.model.d_model = 1024  # Table 3 big: d_model=1024, d_ff=4096, h=16, P_drop=0.3.
    c.model.d_ff = 4096
    c.model.num_heads = 16
    c.model.dropout_rate = 0.3
    c.model.dtype = "bfloat16"
    c.num_train_steps = 300_000
    return c
