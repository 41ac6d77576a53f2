"""The oblique flight the Gaussian claim tests share (cameras 35° off nadir at 40 m, 0.8 s, 1 ms events)."""

OBLIQUE_FLIGHT = {
    "oblique": True,
    "pitch_deg": 35.0,
    "altitude": 40.0,
    "duration": 0.8,
    "supersample": 2,
    "event_step": 0.001,
}
