"""A research group's shared services (PostgreSQL, an MLflow server, a Ray head): ``fedsweep team``."""
