"""Training our own DiffusionGemma-architecture code model: corpus, tokenizer, trainer, export, model card."""
