"""LightningDataModules and seeded data generators, one module per family of papers."""
