"""Small real data sets shipped with litlab (installed as ``litlab.data``); see README.md beside this file."""
