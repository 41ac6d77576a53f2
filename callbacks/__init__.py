"""Lightning callbacks and trainer plugins shared by every litlab method."""
