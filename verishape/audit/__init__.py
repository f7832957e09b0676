"""``verishape verify-guards``: audit a script's compiled guards against the declared
input space, with proofs for what is implied and counterexamples (replayed) for what is
not."""

from .run import verify_guards

__all__ = ["verify_guards"]
