"""Your own parallel text: a small model that a CPU trains, on files named on the command line.

    python train.py --config=configs/text.py --workdir=runs/mytext \
        --config.data.text_train_tsv=train.tsv --config.data.text_eval_tsv=valid.tsv

Each TSV line is `source<TAB>target`, UTF-8. Two aligned files (one sentence a line) work as
well: `--config.data.text_train_src=train.en --config.data.text_train_tgt=train.fr` instead of
`text_train_tsv`, likewise `text_eval_src`/`text_eval_tgt`. The training and the validation
split are both needed (validation loss and BLEU every `eval_every` steps). To translate a test
split after the last step, add `--config.data.text_test_tsv=test.tsv --config.test_sentences=-1`.
A shared SentencePiece vocabulary of at most `vocab_size` pieces is trained on the training
split into `runs/mytext/tokenizer.model` on first use. To continue a converted OPUS-MT model (or
another translation run) on these files instead, with its tokenizer, add
`--config.init_from=<its workdir>`: docs/interop.md gives the whole recipe.
"""

from configs.default import get_config as default_config


def get_config():
    c = default_config()  # The default's small model (2+2 layers, d_model 128), own text below.
    c.model.dropout_rate = 0.1  # A fixed corpus is seen many times: keep dropout on.

    c.data.source = "text"  # Set text_{train,eval}_tsv (or _src and _tgt) on the command line.
    c.data.vocab_size = 8000  # An upper bound: a small corpus yields fewer pieces.
    c.data.spm_sample_size = 200_000  # Sentences (both sides) the tokenizer is trained on.
    c.data.max_len = 64  # Pieces per side; longer training pairs are left out.
    # Positions (sinusoidal, §3.5) for inputs up to 255 pieces: longer test or user sentences
    # are translated whole rather than cut at data.max_len.
    c.model.max_len = 256

    c.num_train_steps = 2000  # Updates; each sees about 4096 tokens per side.
    c.warmup_steps = 400  # Noam warm-up.
    c.lr_factor = 0.5  # Peak about 2.2e-3 at step 400 for d_model 128.
    c.eval_every = 500  # Validation loss and BLEU.
    c.checkpoint_every = 500  # Also on the last step and on SIGTERM.
    c.test_sentences = 0  # No test split by default; -1 decodes all of text_test_* at the end.
    return c
