"""Labelled texts and text pairs for fine-tuning the encoder (BERT) on classification."""
