"""The generic name → factory registry: one entry per name, "did you mean" on a typo."""

from __future__ import annotations

import sys

import pytest

from services.core.errors import NevisError, UnknownNameError
from services.core.registry import Registry, lazy


@pytest.fixture
def colours() -> Registry[object]:
    registry: Registry[object] = Registry("colour")
    registry.register("red", lambda: "R")
    registry.register("green", lambda: "G")
    return registry


def test_lookup_lists_and_membership(colours) -> None:
    assert colours.get("red")() == "R"
    assert colours.names() == ("green", "red") == tuple(colours)
    assert "green" in colours and "blue" not in colours and 3 not in colours and [] not in colours
    assert len(colours) == 2


def test_a_typo_is_an_unknown_name_with_a_suggestion(colours) -> None:
    with pytest.raises(UnknownNameError) as info:
        colours.get("gren")
    message = str(info.value)
    assert "Unknown colour 'gren'" in message and "Did you mean 'green'" in message
    assert "Known: green, red." in message
    assert isinstance(info.value, NevisError) and isinstance(info.value, KeyError)


def test_a_name_far_from_every_entry_lists_them_without_a_guess(colours) -> None:
    with pytest.raises(UnknownNameError, match="Known: green, red") as info:
        colours.get("ultraviolet")
    assert "Did you mean" not in str(info.value)


def test_an_empty_registry_says_so() -> None:
    with pytest.raises(UnknownNameError, match=r"\(none\)"):
        Registry("thing").get("x")


def test_one_entry_per_name(colours) -> None:
    with pytest.raises(ValueError, match="already registered"):
        colours.register("red", lambda: "r")
    assert colours.get("red")() == "R"


@pytest.mark.parametrize("name", ["", " red", None])
def test_names_must_be_plain_strings(colours, name) -> None:
    with pytest.raises(ValueError, match="colour name"):
        colours.register(name, lambda: None)


def test_register_returns_the_factory() -> None:
    registry: Registry[object] = Registry("x")

    def factory() -> int:
        return 1

    assert registry.register("one", factory) is factory


def test_lazy_imports_on_first_call_only(monkeypatch) -> None:
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    factory = lazy("colorsys:rgb_to_hsv")
    assert "colorsys" not in sys.modules
    assert factory(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "colorsys" in sys.modules and factory.target == "colorsys:rgb_to_hsv"


def test_lazy_target_is_checked_up_front_and_resolved_late() -> None:
    with pytest.raises(ValueError, match="package.module:attribute"):
        lazy("colorsys.rgb_to_hsv")
    missing = lazy("no_such_module_here:thing")  # building the entry imports nothing
    with pytest.raises(ModuleNotFoundError):
        missing()
