"""The training corpus: permissive code available offline, filtered, deduplicated, decontaminated."""
