"""The synthetic UAV flight: terrain, a differentiable texture-on-DEM renderer, RGB/event/LiDAR sensors."""
