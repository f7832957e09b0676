"""The backend object that marks a frame as verishape's and keeps caches apart.

It wraps the backend the user chose (a name such as ``"inductor"``/``"aot_eager"`` or a
callable) and calls it unchanged, inside ``torch.compiler.config.patch(cache_key_tag=...)``:
the tag enters the keys of Inductor's FX graph cache and the AOTAutograd cache, so a
verishape artifact (whose guards may be fewer) is never served to a stock compile, nor
the reverse.

The tag names what the artifact's shape answers depend on: a hash of the source of every
module of the layers (``verishape/core/``, ``solvers/``, ``proofs/``, ``compiler/`` and its
subfolders: :func:`answer_sources`), the default solver limits, the Z3 version and the
package version.
A change to any of them gives new keys, so an artifact compiled under an older encoding
is never reused.  Per compile, settings other than the defaults
(:class:`verishape.core.settings.Settings`: solver limits, guard minimization, widening,
generic recompiles) add the digest of the whole settings value as a suffix.

AOTAutograd compiles the backward graph lazily, on the first ``.backward()``, outside
the backend call; :func:`install_aot_hook` makes the backward compiler run under the
tag its forward was compiled with, and lets widening watch the AOTAutograd call.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

import torch
import z3

import verishape.solvers as solvers
from verishape.proofs.encoding import hash_sources, package_sources
from verishape.core import torch_seam
from verishape._version import __version__
from verishape.core.premises import current_prover
from verishape.core.settings import DEFAULT as DEFAULT_SETTINGS
from verishape.core.settings import Settings
from verishape.core.shape_env import VeriShapeEnv, minimization_enabled

from .widen import candidate, generic_recompile, kept
from .widen import reuse as widen

from . import declared as declared_sizes
from . import frames
from .frames import MARKER

#: The layers (every folder below the front doors), whole: see :func:`answer_sources`.
_PACKAGES = ("verishape.core", "verishape.compiler", "verishape.proofs", "verishape.solvers")


def answer_sources() -> list[tuple[str, bytes]]:
    """``(path, bytes)`` of every module whose text can change a shape answer or an
    installed guard, sorted by path: every module of the layers (``proofs/``, ``solvers/``,
    ``verishape/core/``, ``compiler/`` and its subfolders); the front doors (the command
    line, the audit, fuzzing) only read answers.  Taking whole packages errs on the side
    of a new tag: a new module there is covered without anyone remembering to list it."""
    return package_sources(_PACKAGES)


def fingerprint(*, sources: Iterable[tuple[str, bytes]], limits: solvers.Limits, z3_version: str,
                version: str) -> str:
    """A short hash of everything the answers depend on (see the module docstring)."""
    h = hashlib.sha256()
    hash_sources(h, sources)
    h.update(b"limits\0" + repr(sorted(dataclasses.asdict(limits).items())).encode())
    h.update(b"z3\0" + z3_version.encode() + b"\0package\0" + version.encode())
    return h.hexdigest()[:16]


CACHE_TAG = "verishape-{}-{}".format(__version__, fingerprint(
    sources=answer_sources(), limits=solvers.Limits(), z3_version=z3.get_full_version(), version=__version__))


def current_settings(*, widen_specializations: bool, generic_recompiles: bool) -> Settings:
    """The settings a compile runs under now: the scoped ones (the prover's limits, guard
    minimization) with the backend's own."""
    return Settings(limits=current_prover().limits, minimize_guards=minimization_enabled(),
                    widen_specializations=widen_specializations, generic_recompiles=generic_recompiles)


def cache_tag(user_tag: str | None, settings: Settings) -> str:
    """The tag a compile under ``settings`` stores its artifacts under, after the user's own:
    :data:`CACHE_TAG` under the defaults, with the digest of the whole settings value
    otherwise (a change of any setting gives new keys)."""
    ours = CACHE_TAG if settings == DEFAULT_SETTINGS else f"{CACHE_TAG}-settings-{settings.digest()}"
    # a tag set by verishape already (``verishape.enable()``, a verishape frame inside
    # another) keeps only the user's part: one verishape part, this compile's
    user = "+".join(part for part in (user_tag or "").split("+") if part and not part.startswith(CACHE_TAG))
    return f"{user}+{ours}" if user else ours


def _is_ours(tag: str) -> bool:
    return any(part.startswith(CACHE_TAG) for part in tag.split("+"))


_install_lock = threading.Lock()
_aot_hook_installed = False


def install_aot_hook() -> None:
    """Wrap the AOTAutograd entry of Dynamo's backends (idempotent, thread-safe), for two
    things a verishape compile needs there.

    Dynamo's AOTAutograd backends (``aot_eager`` and Inductor's ``compile_fx`` alike)
    reach ``aot_module_simplified`` through ``torch._dynamo.backends.common``; while a
    verishape backend compiles, (1) the ``bw_compiler`` passed there is wrapped to re-enter
    the tag in force now when it runs later (the backward carries its forward's tag), and
    (2) widening sees the call (its graph, inputs and options) and wraps its inference
    compiler to record the lowering (:func:`verishape.compiler.widen.kept.observe_aot`).
    Stock compiles are left untouched."""
    global _aot_hook_installed
    with _install_lock:
        if _aot_hook_installed:
            return
        from torch._dynamo.backends import common

        original = common.aot_module_simplified

        @functools.wraps(original)
        def aot_module_simplified(mod: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
            tag = torch.compiler.config.cache_key_tag
            if _is_ours(tag) and kwargs.get("bw_compiler") is not None:
                kwargs["bw_compiler"] = _under_tag(kwargs["bw_compiler"], tag)
            if _is_ours(tag):
                kwargs = kept.observe_aot(mod, args, kwargs)
            return original(mod, args, *rest, **kwargs)

        common.aot_module_simplified = aot_module_simplified  # type: ignore[attr-defined]
        _aot_hook_installed = True


def _under_tag(compiler: Callable[..., Any], tag: str) -> Callable[..., Any]:
    @functools.wraps(compiler)
    def compile_under_tag(*args: Any, **kwargs: Any) -> Any:
        with torch.compiler.config.patch(cache_key_tag=tag):
            return compiler(*args, **kwargs)

    return compile_under_tag


class VerishapeBackend:
    """Calls the user's backend; its presence in a frame's backend chain selects
    VeriShapeEnv for that frame (see :mod:`verishape.compiler.frames`)."""

    def __init__(self, backend: str | Callable[..., Any], *, mode: str | None, options: dict[str, Any] | None,
                 dynamic: bool | None, widen_specializations: bool = True,
                 generic_recompiles: bool = True, declared: declared_sizes.Declared | None = None,
                 owner: object = None) -> None:
        setattr(self, MARKER, True)
        #: the backend Dynamo files this frame's entries under: this object, or under
        #: ``verishape.enable()`` (one of these per trace) the frame's own backend; a kept
        #: compile runs only for calls its owner compiles (``Kept.owner``)
        self.owner = self if owner is None else owner
        self._widen = widen_specializations
        #: read by :func:`verishape.compiler.widen.generic_recompile.wants_generic`
        self.generic_recompiles = bool(widen_specializations and generic_recompiles)
        #: the sizes ``shapes_spec`` declares (:mod:`verishape.compiler.declared`), read by
        #: :func:`verishape.compiler.widen.generic_recompile.declared_of`
        self.declared = declared
        if self.generic_recompiles or declared is not None:
            generic_recompile.install()
        self._dynamic = dynamic
        install_aot_hook()
        self._spec = backend
        self.__name__ = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
        if backend == "inductor":
            # torch.compile builds this wrapper for "inductor" itself; we build the same
            # one so mode and options mean exactly what they mean there.
            self._inner: Any = torch_seam.inductor_wrapper_class()(mode or "default", options, dynamic)
        else:
            from torch._dynamo.backends.registry import lookup_backend

            self._inner = lookup_backend(backend)

    def compiler_config(self) -> dict[str, Any] | None:
        """The Inductor config the user's backend compiles under (None for another backend),
        as ``torch.compile``'s result reports it."""
        read = getattr(self._inner, "get_compiler_config", None)
        return read() if callable(read) else None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        tag = cache_tag(torch.compiler.config.cache_key_tag, self.settings())
        if self.declared is not None:
            self._guard_declared_facts()
        with torch.compiler.config.patch(cache_key_tag=tag):
            if not self._widen:
                return self._inner(gm, example_inputs, **kwargs)
            return self._compile_widening(gm, example_inputs, **kwargs)

    def _guard_declared_facts(self) -> None:
        """The declaration's facts about this trace (one variable's sizes equal, the
        assumptions), installed as guards of the frame before it compiles."""
        tx = torch_seam.current_tx()
        if tx is None or tx is not tx.output.root_tx or self.declared is None:
            return
        tracked = [(tf.source, tf.fake) for tf in tx.output.tracked_fakes]
        for fact in declared_sizes.facts(self.declared, tracked, tx.f_code):
            tx.output.shape_env.evaluate_expr(fact)

    def settings(self) -> Settings:
        """The settings this backend compiles under now (hashed whole into the cache tag)."""
        return current_settings(widen_specializations=self._widen, generic_recompiles=self.generic_recompiles)

    def _compile_widening(self, gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        """A call whose kept sizes are 1 runs the generic artifact of an earlier compile of
        this frame when that is proved (the user's backend compiles nothing); any other
        compile runs the user's backend as usual and is kept for such a call (see
        :mod:`verishape.compiler.widen.reuse`)."""
        tx = torch_seam.current_tx()  # None: called outside a Dynamo trace
        env = tx.output.shape_env if tx is not None else None
        if not isinstance(env, VeriShapeEnv) or tx is not tx.output.root_tx:
            return self._inner(gm, example_inputs, **kwargs)
        if candidate.is_candidate(env):
            return self._compile_candidate(env, tx, gm, example_inputs, **kwargs)
        candidate.note_inputs(tx)
        reused = widen.reuse(env, tx, gm, example_inputs, self.__name__, current_prover(), self.owner)
        if reused is not None:
            generic_recompile.reused(tx)
            return reused
        why = self._raise_declared_ones(tx) or generic_recompile.retrace_after_refusal(tx)
        if why is not None:
            frames.forget(env)  # the attempt is dropped: the next one is the frame's
            candidate.retrace(tx, why)
        with kept.recording(env, self.__name__, gm) as rec:
            compiled = self._inner(gm, example_inputs, **kwargs)
        if rec is not None:
            kept.keep(rec, tx, compiled, self.__name__, self.owner)
        return compiled

    def _raise_declared_ones(self, tx: Any) -> str | None:
        """Nothing kept serves this trace: why to trace it again with its declared leading
        sizes at 1 at 2 (Note [A declared size at 1 is compiled at 2]), or None."""
        if self.declared is None:
            return None
        return candidate.raise_after_refusal(tx, self.declared.leading_at_one_in(getattr(tx, "f_locals", None) or {},
                                                                                 tx.f_code))

    def _compile_candidate(self, env: Any, tx: Any, gm: torch.fx.GraphModule, example_inputs: Any,
                           **kwargs: Any) -> Any:
        """A trace that kept sizes symbolic at 1 (:mod:`verishape.compiler.widen.candidate`),
        or traced declared sizes at 1 at 2: compiled and kept, never returned; Dynamo then
        traces the frame again as stock."""
        raised = candidate.is_raised(env)
        why = candidate.pinned(env) or ("the frame takes other tensors than at its previous compile"
                                        if not raised and candidate.other_inputs(tx) else None)
        if why is not None:
            candidate.restart(f"not compiled: {why}", compiled=False, tx=tx)
        try:
            with kept.recording(env, self.__name__, gm) as rec:
                compiled = self._inner(gm, example_inputs, **kwargs)
            if rec is not None:
                kept.keep(rec, tx, compiled, self.__name__, self.owner, candidate=True)
        except torch._dynamo.exc.RestartAnalysis:
            raise  # the backend's own restart (a tensorified scalar): the candidate attempt again
        except Exception as exc:  # noqa: BLE001 - the stock attempt compiles again and fails as stock would
            env.verishape_log.not_widened.append(("a size kept symbolic at 1", f"the candidate failed: {exc!r}"[:300]))
            candidate.restart(f"its compile failed: {exc!r}"[:200], compiled=True, tx=tx)
        candidate.restart("compiled and kept" if rec is not None else "compiled, nothing to keep", compiled=True, tx=tx)

    def __getattr__(self, name: str) -> Any:
        # get_compiler_config(), reset() and friends belong to the wrapped backend.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["_inner"], name)

    def __repr__(self) -> str:
        return f"VerishapeBackend({self._spec!r})"
