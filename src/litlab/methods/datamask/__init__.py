"""DATAMASK: joint quality-and-diversity pre-training data selection by mask learning (Fan, Xian, Sun,
Shen, ICLR 2026, arXiv 2512.24265)."""
