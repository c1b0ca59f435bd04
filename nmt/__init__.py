"""The command line: ``python -m nmt COMMAND [options]``, one subcommand per thing users do
(``nmt.__main__`` lists them). Each command is a thin shell over the library's typed functions:
argparse, then one call (ARCHITECTURE.md, Layers)."""
