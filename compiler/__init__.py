"""torch.compile integration: choosing verishape's ShapeEnv per frame."""
