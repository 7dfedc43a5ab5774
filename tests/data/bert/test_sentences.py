"""The sentence splitter for BERT's pairs: abbreviations, dotted names, numbers and code."""

from transformer_jax.data.bert.sentences import looks_like_code, split_sentences


def test_prose_splits_at_sentence_ends_only():
    text = (
        "Return the path, e.g. os.path.join() joins parts. It is 3.14 wide!\n"
        "Is it? Yes (see Fig. 2). Written by J. Smith et al. in 2020.\n"
        'He said "Stop." Then he left.'
    )
    assert split_sentences(text) == [
        "Return the path, e.g. os.path.join() joins parts.",
        "It is 3.14 wide!",
        "Is it?",
        "Yes (see Fig. 2).",
        "Written by J. Smith et al. in 2020.",
        'He said "Stop."',
        "Then he left.",
    ]


def test_paragraphs_never_merge_and_code_stays_whole():
    doc = (
        "Format the value.\n\nExample:\n\n    >>> format(3)\n    '3'\n\n"
        ">>> x = 1. Not split\n\nLast one.  Really."
    )
    assert split_sentences(doc) == [
        "Format the value.",
        "Example:",
        "    >>> format(3)\n    '3'",
        ">>> x = 1. Not split",
        "Last one.",
        "Really.",
    ]
    assert looks_like_code("\tindented") and not looks_like_code("plain. Text")
    assert split_sentences("\n\n  \n") == []
