"""BERT pretraining data (sentences, next-sentence pairs, masking), and the input layout that
fine-tuning and inference share (`inputs`)."""
