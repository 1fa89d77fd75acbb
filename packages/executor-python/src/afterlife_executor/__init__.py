"""afterlife-executor for DBOS Transact for Python: crash recovery in about a second, SIGTERM drains, self-fencing."""
