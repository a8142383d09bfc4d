"""An in-repository fill-in-the-middle set cut from packages that no training source list names.

sources: the pinned packages; build: fetch, filter, decontaminate, cut and write the JSONL files
here; cuts: the cursor positions; records: the JSONL record. `python -m evaluation.heldout build`
rebuilds it, `python -m evaluation.heldout baseline` scores the no-model copy baseline on it.
"""
