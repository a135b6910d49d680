"""Server optimizers: turn the base method's update direction into the next global model."""
