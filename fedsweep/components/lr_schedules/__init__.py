"""Learning-rate schedules: the client rate of each round."""
