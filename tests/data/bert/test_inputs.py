"""Texts to BERT inputs: `[CLS] A [SEP] (B [SEP])`, longest-first truncation from the end,
literal specials neutralised, `[MASK]` kept as the mask token without a stray space piece, and
the model's attention mask marking exactly the tokens laid out."""

import numpy as np
import pytest

from transformer_jax.data.bert.inputs import (
    encode_masked,
    encode_plain,
    layout,
    real_tokens,
    truncate_pair,
)
from transformer_jax.data.tokenizer import train_tokenizer
from transformer_jax.tokens import BERT_SYMBOLS, CLS_ID, MASK_ID, PAD_ID, SEP_ID, UNK_ID


@pytest.fixture(scope="module")
def tokenizer():
    words = "the function returns a list of values from module path json open read".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, 9)) for _ in range(400)]
    return train_tokenizer(
        texts, vocab_size=300, byte_fallback=True, user_defined_symbols=[*BERT_SYMBOLS, "\n"]
    )


def test_single_text_and_pair_layout():
    tokens, segments, cut = layout([11, 12, 13], None, 8)
    np.testing.assert_array_equal(tokens, [CLS_ID, 11, 12, 13, SEP_ID, PAD_ID, PAD_ID, PAD_ID])
    np.testing.assert_array_equal(segments, 0)
    assert not cut
    tokens, segments, cut = layout([11, 12], [21, 22, 23], 9)
    np.testing.assert_array_equal(tokens, [CLS_ID, 11, 12, SEP_ID, 21, 22, 23, SEP_ID, PAD_ID])
    np.testing.assert_array_equal(segments, [0, 0, 0, 0, 1, 1, 1, 1, 0])
    assert not cut


def test_truncation_cuts_the_longer_text_from_its_end():
    a, b = list(range(10, 16)), [21, 22]
    assert truncate_pair(a, b, 5)
    assert a == [10, 11, 12] and b == [21, 22]
    a, b = [10, 11], list(range(20, 30))
    assert truncate_pair(a, b, 6) and a == [10, 11] and b == [20, 21, 22, 23]
    a, b = [10, 11, 12, 13], [20, 21, 22, 23]  # equal lengths: a is cut first
    assert truncate_pair(a, b, 5) and (len(a), len(b)) == (2, 3)
    tokens, _, cut = layout(list(range(10, 30)), None, 8)
    assert cut and tokens.tolist() == [CLS_ID, 10, 11, 12, 13, 14, 15, SEP_ID]
    with pytest.raises(ValueError, match="no room"):
        layout([1], [2], 4)


def test_literal_specials_become_unk_and_masks_stay(tokenizer):
    (ids,) = encode_plain(tokenizer, ["the [CLS] list [SEP] [MASK]"])
    assert CLS_ID not in ids and SEP_ID not in ids and MASK_ID not in ids
    assert ids.count(UNK_ID) == 3
    masked = encode_masked(tokenizer, "the [MASK] returns a list")
    assert masked.count(MASK_ID) == 1
    before = masked[: masked.index(MASK_ID)]
    assert tokenizer.id_to_piece(before[-1]) != "▁"  # no lone space piece before the mask
    assert masked == [*encode_plain(tokenizer, ["the"])[0], MASK_ID,
                      *encode_plain(tokenizer, [" returns a list"])[0]]  # fmt: skip
    two = encode_masked(tokenizer, "[MASK] function [MASK]")
    assert two[0] == MASK_ID and two[-1] == MASK_ID and two.count(MASK_ID) == 2


def test_real_tokens_marks_exactly_what_layout_wrote(tokenizer):
    texts = ["the <pad> list", "json open read path", "<unk> </s> <s> \x00"]  # spelled specials
    encoded = encode_plain(tokenizer, texts)
    assert all(PAD_ID not in ids for ids in encoded)  # no text encodes to the padding id
    for a, b in [(encoded[0], None), (encoded[1], encoded[2]), (encoded[2], None)]:
        tokens, _, _ = layout(a, b, 40)
        written = len(a) + 2 + (0 if b is None else len(b) + 1)
        np.testing.assert_array_equal(real_tokens(tokens), np.arange(40) < written)
