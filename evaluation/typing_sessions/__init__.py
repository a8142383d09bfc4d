"""Typing sessions: code retyped through the real server, what is shown and what is taken
(`dgemma-lsp bench typing`), and the show-or-not decision fitted on them."""
