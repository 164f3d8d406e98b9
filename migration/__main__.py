from migration.cli.app import main

main()
