"""An in-repository fill-in-the-middle set cut from packages that no training source list names.

sources: the pinned packages; build: fetch, filter, decontaminate, cut and write the JSONL files
here; cuts: the cursor positions; records: the JSONL record; workspaces: each source unpacked whole,
for repository-level evaluation; definitions and crossfile: the cross-file subset, positions whose
middle uses a name another file of the package defines. `python -m evaluation.heldout build`
rebuilds the set, `crossfile` the subset, `workspaces` the workspaces, and `baseline` scores the
no-model copy baseline on it (`--workspaces`: also with each row's other files).
"""
