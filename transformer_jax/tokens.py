"""The special token ids of the tokenizers the project trains, and of its batches.

SentencePiece models are trained with these ids (`transformer_jax.data.tokenizer`), batches pad
with `PAD_ID`, decoders start from `BOS_ID` and stop at `EOS_ID`. Change them here only. A
tokenizer converted from a Hugging Face checkpoint keeps its own ids (`transformer_jax.interop`),
and the front ends read them from the tokenizer (`tokenizer.bos_id`, ...).
"""

PAD_ID = 0  # Padding: never predicted, never counted in a loss; models mask it by length.
EOS_ID = 1  # End of sequence: appended to every source and target.
BOS_ID = 2  # Beginning of sequence: the decoder's first input.
UNK_ID = 3  # Characters the tokenizer never saw.

# BERT's inputs (`[CLS] A [SEP] B [SEP]`, masked positions): SentencePiece user-defined symbols,
# which take the ids right after the four above, in this order (never split, never masked).
BERT_SYMBOLS = ("[CLS]", "[SEP]", "[MASK]")
CLS_ID = 4  # Starts every BERT input; its output is pooled for classification.
SEP_ID = 5  # Ends each of the two segments.
MASK_ID = 6  # Replaces most of the tokens the masked LM must predict.
FIRST_REGULAR_ID = 7  # With BERT symbols, ids from here on are ordinary pieces.
