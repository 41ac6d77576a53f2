"""The packaged Hydra config tree (found with ``pkg://litlab.configs``)."""
