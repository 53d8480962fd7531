"""Training a model: the trainer that orchestrates, the schedule and its grid events, ray
filtering, Adam as torch steps it, the NaN guard, training states for resuming, the training log."""
