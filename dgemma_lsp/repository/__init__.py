"""The repository around the open documents: which files are read (files.py), how they are indexed
(index.py, in the background by indexer.py), and what a completion gets from them: the definitions of
imported names (imports.py) and windows similar to the code at the cursor (retrieval.py)."""
