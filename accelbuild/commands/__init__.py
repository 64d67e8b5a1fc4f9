"""The command line's commands, one module each: ``main(args) -> int`` reads the parsed arguments, calls
``accelbuild.api`` or the engine, and prints. ``accelbuild.cli`` parses and dispatches; no command names a
target family (what differs by family comes from its ``Target``)."""
