"""A byte-level BPE tokenizer trained in memory (no downloads) for prompt-building tests."""

from __future__ import annotations

import random


def train_tokenizer(vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = (
        "the quick brown fox jumps over lazy dog agent tool review chat model token cache "
        "prefix serve router kernel expert"
    ).split()
    rng = random.Random(0)
    text = [" ".join(rng.choice(words) for _ in range(50)) for _ in range(200)]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(text, trainer)
    return tok
