"""BERT inputs: masking for the masked language model (pairs and sentences come next)."""
