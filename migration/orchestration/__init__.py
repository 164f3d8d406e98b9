"""What the Airflow DAG tasks do, as plain functions (no Airflow imports): DAG files only wire
these to operators, so the same steps are testable without a scheduler."""
