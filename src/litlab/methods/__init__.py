"""Paper methods: one sub-package per paper, with no Lightning in the math."""
