"""mylab's Hydra configs, registered with litlab under the ``litlab.configs`` entry point."""
