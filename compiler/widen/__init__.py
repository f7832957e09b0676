"""Batch 1 from the batch-N artifact: what a size-1 call must prove before it runs the
generic compiled code (entry point: :func:`verishape.compiler.widen.reuse.reuse`)."""
