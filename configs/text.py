"""Your own parallel text: a small model sized for a CPU, on files named on the command line.

    python train.py --config=configs/text.py --workdir=runs/mytext \
        --config.data.text_train_tsv=train.tsv --config.data.text_eval_tsv=valid.tsv

Each TSV line is `source<TAB>target`, UTF-8. Two aligned files (one sentence a line) work as
well: `--config.data.text_train_src=train.en --config.data.text_train_tgt=train.fr` instead of
`text_train_tsv`, likewise `text_eval_src`/`text_eval_tgt`. The training and the validation
split are both needed (validation loss and BLEU every `eval_every` steps). To translate a test
split after the last step (beam search), add `--config.data.text_test_tsv=test.tsv
--config.test_sentences=-1`. A shared SentencePiece vocabulary of at most `vocab_size` pieces
is trained on the training split into `runs/mytext/tokenizer.model` on first use. To continue
a converted OPUS-MT model (or another translation run) on these files instead, with its
tokenizer, add `--config.init_from=<its workdir>`: docs/interop.md gives the whole recipe.

The budget is set in steps: 5,800 steps of about 2,048 tokens per side (12M target tokens); the
recorded run on 2 CPU cores trained for
<!--fig gettext_es_recipe.json:runs/config/train_seconds:min-->30 min 20 s<!--/fig-->. On more
cores or a GPU, raise `num_train_steps` with the time you have; docs/translation.md says what
each choice below gave on 48,000 real pairs.
"""

from configs.default import get_config as default_config


def get_config():
    c = default_config()  # The default's small model (2+2 layers, d_model 128), own text below.
    c.model.dropout_rate = 0.1  # A fixed corpus is seen many times: keep dropout on.

    c.data.source = "text"  # Set text_{train,eval}_tsv (or _src and _tgt) on the command line.
    # An upper bound: a small corpus yields fewer pieces. Against 8,000: the output layer costs
    # half, so more text is seen in the same time, and rare words are split into known pieces.
    c.data.vocab_size = 4000
    c.data.spm_sample_size = 200_000  # Sentences (both sides) the tokenizer is trained on.
    c.data.max_len = 64  # Pieces per side; longer training pairs are left out.
    # Positions (sinusoidal, §3.5) for inputs up to 255 pieces: longer test or user sentences
    # are translated whole rather than cut at data.max_len.
    c.model.max_len = 256
    # Per side and step. Half the default's batch: twice the updates for the same text, and
    # each token costs less on a CPU.
    c.data.tokens_per_batch = 2048

    c.num_train_steps = 5800  # About 30 minutes on 2 CPU cores.
    c.schedule = "linear"  # Warm-up, then linear decay to 0 at the last step: a run of a fixed
    c.learning_rate = 2e-3  # length ends annealed (Noam's 1/sqrt decay is still high there).
    c.warmup_steps = 400
    c.eval_every = 1000  # Validation loss and greedy BLEU.
    c.checkpoint_every = 500  # Also on the last step and on SIGTERM.
    c.test_checkpoint = "last"  # Annealed to 0: averaging the last checkpoints adds nothing.
    c.test_sentences = 0  # No test split by default; -1 decodes all of text_test_* at the end.
    c.test_beam_size = 4  # The test decodes with a beam of 4 (alpha 0.6, §6.1).
    return c
