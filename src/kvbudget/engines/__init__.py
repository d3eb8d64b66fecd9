"""Engine policies: how each engine turns (model, GPU, settings) into a MemoryPlan."""
