"""BridgeDrive (Liu et al., ICLR 2026): anchor-guided diffusion-bridge planner, evaluated in highway-env."""
