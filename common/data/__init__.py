"""Text in, tokens out: named corpora and their downloads, your own text, tokenizers, token files."""
