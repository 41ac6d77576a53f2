"""Utilities shared by the entry points: run folder, instantiation, errors."""
