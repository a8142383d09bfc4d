"""dgemma-lsp: an LSP server whose completions come from a local DiffusionGemma engine."""

__version__ = "0.1.0"
