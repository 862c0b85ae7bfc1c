"""Which CPUs the AMX guard applies to (the guard itself is exercised by every test
that runs the real model on a machine whose CPU reports AMX)."""

from __future__ import annotations

import pytest

import voice.llamacpp as amx

SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
ZEN4 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n"


def test_amx_is_read_from_the_cpu_flags() -> None:
    assert amx.cpu_has_amx(SAPPHIRE_RAPIDS)
    assert not amx.cpu_has_amx(ZEN4)
    assert not amx.cpu_has_amx("")  # no flags line (not Linux on x86): leave llama.cpp be


def test_the_guard_stays_off_where_asked_or_without_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amx, "cpu_has_amx", lambda: False)
    assert not amx.avoid_amx()
    monkeypatch.setattr(amx, "cpu_has_amx", lambda: True)
    monkeypatch.setenv(amx.ENV, "1")
    assert not amx.avoid_amx()


def test_on_an_amx_cpu_models_load_without_extra_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    native = pytest.importorskip("llama_cpp.llama_cpp")
    monkeypatch.setattr(native, "llama_model_default_params", native.llama_model_default_params)
    monkeypatch.setattr(amx, "cpu_has_amx", lambda: True)
    monkeypatch.delenv(amx.ENV, raising=False)
    assert amx.avoid_amx() and amx.avoid_amx()  # idempotent
    assert native.llama_model_default_params().use_extra_bufts is False
