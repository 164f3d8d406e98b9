"""The format layer: byte-exact readers and writers of Kafka files. Imports no Spark, Airflow or boto3."""
