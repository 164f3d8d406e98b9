"""What the migrations share: backups outside the log dirs, Kafka's crash-safe replace
protocol (LocalLog.replaceSegments) and the repair of segment indexes."""
