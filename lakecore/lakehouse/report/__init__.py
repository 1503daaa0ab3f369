"""HTML pages: the lakehouse health page, the tree page, and what they share (tier 2)."""
