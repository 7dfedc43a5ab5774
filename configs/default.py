"""Default: the embedded English -> French number corpus and a small model, offline on a laptop.

    python train.py --workdir=runs/default

needs no data and no network. It trains, then decodes the 3,000-sentence test split greedily and
prints BLEU and the exact-match rate. The recorded run on a 2-core CPU took
<!--fig main_job_default.json:runs/0/seconds:min-->4 min 54 s<!--/fig--> and matched
<!--fig main_job_default.json:runs/0/test/exact_match:.1%-->98.8%<!--/fig--> of the test
sentences exactly; the README's table of main jobs has the rest.
"""

from configs.common import base_config


def get_config():
    c = base_config()
    c.model.num_encoder_layers = 2  # A small model that a 2-core CPU trains in minutes.
    c.model.num_decoder_layers = 2
    c.model.d_model = 128
    c.model.num_heads = 4
    c.model.d_ff = 512
    c.model.dropout_rate = 0.0  # Fresh pairs every step (less than 2 epochs): no overfitting.

    c.data.source = "embedded"  # Generated number phrases: nothing to download.
    c.data.embedded_target_lang = "fr"
    c.data.vocab_size = 400  # An upper bound: the corpus yields about 110 unigram pieces.
    c.data.max_len = 48  # Longest phrases are about 30 pieces.
    c.data.tokens_per_batch = 4096  # Per side and step.
    c.data.pack = True  # One row shape (one compilation), about 95% of tokens real.

    c.num_train_steps = 900
    c.warmup_steps = 200
    c.lr_factor = 0.5  # Peak 3.1e-3 at step 200; 1.0 trains too, with loss spikes.
    c.log_every = 50
    c.eval_every = 300
    c.eval_bleu_sentences = 256
    c.checkpoint_every = 300
    c.test_sentences = -1  # Decode the whole test split at the end.
    return c
