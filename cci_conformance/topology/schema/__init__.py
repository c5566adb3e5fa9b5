"""Data files of the topology package: the JSON schema of topology specs."""
