"""BERT pretraining on the standard library's documentation plus English / French numbers.

    python train.py --config=configs/bert_bilingual_pretrain.py --workdir=runs/bert_bilingual

configs/bert_stdlib_pretrain.py (the same model, steps and documentation) with 2,500 integers of
the embedded translation corpus's training split added as documents, each written in English
then in French (`data.mix_numbers`): a pair `[CLS] English [SEP] French [SEP]` is IsNext, and
its NotNext B is another integer's French (`data.mix_numbers_negatives="numbers"`), so the
masked LM can read a masked number word from the other language and next-sentence prediction
must tell the right French from another (XLM's translation language model, Lample and Conneau
2019). None of numbers_pair's validation or test integers is among them. The workdir is the
`init_from` of configs/bert_numbers_pair.py. The recorded run on 2 CPU cores took
<!--fig main_job_bert_bilingual_pretrain.json:runs/0/seconds:min-->30 min 42 s<!--/fig-->; its
test figures, and fine-tuning from it against from scratch, are in docs/bert.md.
"""

from configs import bert_stdlib_pretrain


def get_config():
    c = bert_stdlib_pretrain.get_config()
    c.data.mix_numbers = 2500  # One integer a document: a third of the training pairs.
    c.data.mix_numbers_negatives = "numbers"
    return c
