"""The special token ids, fixed for every tokenizer, batch and model of the project.

SentencePiece models are trained with these ids (`transformer_jax.data.tokenizer`), batches pad
with `PAD_ID`, decoders start from `BOS_ID` and stop at `EOS_ID`. Change them here only.
"""

PAD_ID = 0  # Padding: never attended to, never predicted, never counted in a loss.
EOS_ID = 1  # End of sequence: appended to every source and target.
BOS_ID = 2  # Beginning of sequence: the decoder's first input.
UNK_ID = 3  # Characters the tokenizer never saw.
