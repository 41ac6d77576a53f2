"""What the entry points share: config checks, the run folder, Trainer building, error reporting, --help."""
