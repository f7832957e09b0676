"""Hygiene that protects soundness: cache tags that change with the answers, and caches
that notice a narrowed range."""

from __future__ import annotations

import dataclasses

import pytest
import sympy
import torch
import z3
from torch.utils._sympy import functions as tf

from verishape import solvers
import verishape
from verishape.compiler import CACHE_TAG, backend
from verishape._version import __version__
from verishape.core.minimize import Tightening
from verishape.core.premises import use_prover
from verishape.core.settings import DEFAULT as DEFAULT_SETTINGS
from verishape.core.settings import Settings
from verishape.core.shape_env import VeriShapeEnv, guard_minimization

# ---------------------------------------------------------------- the version counter


def test_narrowing_a_range_bumps_the_version_counter_and_no_cached_answer_outlives_it():
    """Stock's ``_lru_cache`` helpers (``simplify``, ``get_axioms``, static evaluation)
    are dropped only when the env's version counter moves; an answer computed under the
    narrowed range must not be served after it is restored."""
    env = VeriShapeEnv()
    u = env.create_unbacked_symint().node.expr
    expr = tf.Max(1, u)
    assert env.simplify(expr) == expr  # u may be <= 0: the Max stays
    start = env._version_counter
    with env._ranges_tightened([Tightening(u, 1, None, (), None)]):
        inside = env._version_counter
        assert env.simplify(expr) == u  # u >= 1 here
    assert env._version_counter > inside > start
    assert env.var_to_range[u].lower == -sympy.oo or env.var_to_range[u].lower < 1
    assert env.simplify(expr) == expr  # not the answer cached under the narrowed range


def test_no_narrowing_no_bump():
    env = VeriShapeEnv()
    start = env._version_counter
    with env._ranges_tightened([]):
        pass
    assert env._version_counter == start


# ---------------------------------------------------------------- the cache tag

def _inputs(**change):
    base = {"sources": backend.answer_sources(), "limits": solvers.Limits(), "z3_version": z3.get_full_version(),
            "version": __version__}
    return {**base, **change}


def test_the_tag_is_derived_from_what_the_answers_depend_on():
    assert CACHE_TAG == f"verishape-{__version__}-{backend.fingerprint(**_inputs())}"
    names = {name for name, _ in backend.answer_sources()}
    for module in ("verishape.solvers/translate.py", "verishape.solvers/pyarith.py", "verishape.solvers/query.py",
                   "verishape.solvers/symbols.py", "verishape.core/premises.py", "verishape.core/minimize.py",
                   "verishape.core/shape_env.py", "verishape.compiler/frames.py", "verishape.proofs/store.py",
                   "verishape.compiler/widen/reuse.py", "verishape.compiler/export/program.py"):
        assert module in names
    base = backend.fingerprint(**_inputs())
    edited = [(n, t + b"\n# one more line" if n == "verishape.solvers/translate.py" else t) for n, t in backend.answer_sources()]
    assert backend.fingerprint(**_inputs(sources=edited)) != base
    assert backend.fingerprint(**_inputs(limits=solvers.Limits(rlimit=2_000_000))) != base
    assert backend.fingerprint(**_inputs(z3_version="4.8.0")) != base
    assert backend.fingerprint(**_inputs(version="9.9.9")) != base
    assert backend.fingerprint(**_inputs()) == base  # and nothing else moves it


def test_per_compile_settings_that_change_answers_change_the_tag():
    plain = backend.current_settings(widen_specializations=True, generic_recompiles=True)
    assert plain == DEFAULT_SETTINGS
    assert backend.cache_tag(None, plain) == CACHE_TAG
    assert backend.cache_tag("mine", plain) == f"mine+{CACHE_TAG}"
    with use_prover(solvers.Prover(dataclasses.replace(solvers.Limits(), rlimit=10))):
        low_limit = backend.cache_tag(None, backend.current_settings(widen_specializations=True,
                                                                     generic_recompiles=True))
    with guard_minimization(False):
        unminimized = backend.cache_tag(None, backend.current_settings(widen_specializations=True,
                                                                       generic_recompiles=True))
    assert len({CACHE_TAG, low_limit, unminimized}) == 3
    assert all(t.startswith(CACHE_TAG) for t in (low_limit, unminimized))


def _flipped(value):
    if isinstance(value, bool):
        return not value
    if dataclasses.is_dataclass(value):  # the solver limits: change each of its fields in turn
        return [dataclasses.replace(value, **{f.name: getattr(value, f.name) + 1}) for f in dataclasses.fields(value)]
    raise AssertionError(f"test_every_setting_moves_the_digest does not know how to change {value!r}: teach it")


def test_every_setting_moves_the_digest_and_the_tag():
    """The settings are hashed whole: a field added to Settings is in every cache key
    without anyone remembering to add it (this test fails on a field it cannot change)."""
    seen = {DEFAULT_SETTINGS.digest()}
    for field in dataclasses.fields(Settings):
        changed = _flipped(getattr(DEFAULT_SETTINGS, field.name))
        for value in changed if isinstance(changed, list) else [changed]:
            other = dataclasses.replace(DEFAULT_SETTINGS, **{field.name: value})
            assert other.digest() not in seen, field.name
            seen.add(other.digest())
            assert backend.cache_tag(None, other) == f"{CACHE_TAG}-settings-{other.digest()}"
    assert Settings().digest() == DEFAULT_SETTINGS.digest()  # and nothing else moves it
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_SETTINGS.minimize_guards = False  # type: ignore[misc]


def _needs_grad(x):
    return (x * x.shape[0]).sin().sum()


def test_the_lazily_compiled_backward_carries_the_tag():
    """AOTAutograd compiles the backward on the first ``.backward()``, long after the
    backend call that set the tag returned (static shapes: with sizes saved for the
    backward it compiles it up front instead)."""
    from torch._dynamo.backends.common import aot_autograd

    seen: list[tuple[str, str]] = []

    def compiler(kind):
        def compile_graph(gm, example_inputs):
            seen.append((kind, torch.compiler.config.cache_key_tag))
            return gm.forward

        return compile_graph

    aot = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"))
    for compile_fn, want in ((verishape.compile, CACHE_TAG), (torch.compile, "")):
        torch._dynamo.reset()
        seen.clear()
        x = torch.randn(6, requires_grad=True)
        loss = compile_fn(_needs_grad, backend=aot, dynamic=False)(x)
        assert [k for k, _ in seen] == ["forward"]  # the backward is not compiled yet
        assert torch.compiler.config.cache_key_tag == ""
        loss.backward()
        assert seen == [("forward", want), ("backward", want)]
    torch._dynamo.reset()


@pytest.mark.slow
def test_inductor_backward_graph_is_cached_under_the_tag(tmp_path, monkeypatch):
    from torch._inductor import codecache
    from torch._inductor import config as inductor_config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    tags: list[str] = []
    original = codecache.FxGraphHashDetails.__init__

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        tags.append(self.cache_key_tag)

    monkeypatch.setattr(codecache.FxGraphHashDetails, "__init__", spy)
    torch._dynamo.reset()
    with inductor_config.patch(fx_graph_cache=True, fx_graph_remote_cache=False):
        x = torch.randn(6, requires_grad=True)
        loss = verishape.compile(_needs_grad, dynamic=False)(x)
        forward_keys = len(tags)
        loss.backward()
    assert forward_keys >= 1 and len(tags) > forward_keys  # the backward graph got its own key
    assert tags and all(t == CACHE_TAG for t in tags)
    torch._dynamo.reset()


# ---------------------------------------------------------------- the soundness notes


def test_every_note_the_code_cites_is_stated_in_the_architecture_doc():
    """The soundness rules are Notes in docs/architecture.md; code cites them by name
    (``Note [Name]``), never by a number nobody can look up."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    stated = set(re.findall(r"\*\*Note \[([^\]]+)\]\.\*\*", (root / "docs" / "architecture.md").read_text()))
    assert len(stated) >= 7
    cited: dict[str, list[str]] = {}
    numbered = []
    for folder in ("verishape", "compiler", "solvers", "proofs", "tests"):
        for path in (root / folder).rglob("*.py"):
            text = path.read_text(errors="replace")  # a test script may hold other encodings on purpose
            if path.name == "test_hygiene.py":
                continue  # this test names the pattern, not a Note
            for name in re.findall(r"Note \[([^\]]+)\]", text):
                cited.setdefault(name, []).append(path.name)
            if re.search(r"(?i)\b(soundness |DESIGN )?rules? [1-6]\b", text):
                numbered.append(path.name)
    assert cited, "no code cites a Note"
    assert set(cited) <= stated, {n: f for n, f in cited.items() if n not in stated}
    # and the other way: every rule is cited where the library enforces it (a Note no code
    # names is a rule nobody can find the enforcement of)
    in_library = {name for name, files in cited.items() if any(not f.startswith("test_") for f in files)}
    assert stated <= in_library, f"Notes no library module cites: {sorted(stated - in_library)}"
    assert not numbered, f"rules cited by number in {sorted(set(numbered))}: cite the Note by name"
