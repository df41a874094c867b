from rollcli.cli.app import main

main()
