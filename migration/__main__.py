from migration.cli import main

main()
