"""Input pipeline: translation sources, SentencePiece, fixed-shape batches (no model imports)."""
