"""The core: ``VeriShapeEnv``, the premises it may assume and the one way it asks the
solver, guard minimization, decision records, and the one seam to torch's private names.
Front doors (the command line, the audit, fuzzing, the compiler integration) sit above it."""
