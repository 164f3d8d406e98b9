"""Spark jobs: the applications that ``spark-submit`` (and Airflow's SparkSubmitOperator) run."""
