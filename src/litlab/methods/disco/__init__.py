"""DISCo: collective query coverage with a dense subset index (ICLR 2026)."""
