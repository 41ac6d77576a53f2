"""Limited metacognition in LLMs (Ackerman, ICLR 2026): the Delegate and Second Chance games, a harness
for any local HF model, OpenAI-compatible endpoint or simulated agent, and the delegation analysis."""
