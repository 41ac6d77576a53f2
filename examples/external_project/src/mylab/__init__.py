"""mylab: an example of a user's own project on top of litlab (a model, a data module, configs)."""
