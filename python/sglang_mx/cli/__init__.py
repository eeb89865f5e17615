"""`sglang-mx` command line: one module per subcommand, each with `register(subparsers)`."""
