"""`dgemma-lsp bench`: scripted typing sessions against the real server, latency as a user feels it."""
