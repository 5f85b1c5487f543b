"""governance: personas, AI systems, human oversight, decisions and violations."""
