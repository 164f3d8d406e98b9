"""Offline migrations of Apache Kafka on-disk data."""
__version__ = "0.1.0"
