"""Language-model data: documents, tokenized rows, the embedded corpus."""
