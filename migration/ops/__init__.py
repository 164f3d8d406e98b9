"""Operations: what each migration does to log dirs, unit by unit. Imports no Spark or Airflow."""
