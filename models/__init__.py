"""Models: the encoder-decoder Transformer (transformer.py), attention, positional encodings."""
