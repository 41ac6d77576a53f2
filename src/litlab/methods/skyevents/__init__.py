"""SkyEvents (ICLR 2026): event-enhanced UAV reconstruction with GTA timestamp alignment and the RER loss."""
