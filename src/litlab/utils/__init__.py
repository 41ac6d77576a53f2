"""Utilities shared by the entry points: run folder, instantiation, errors."""

from litlab.utils.resolvers import register_resolvers

register_resolvers()
