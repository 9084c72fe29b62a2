"""The index tables' value -> keys map: the same answers whether a value holds one key, a few, or thousands."""

from __future__ import annotations

from app import multimap


def test_keys_are_found_added_once_and_forgotten_with_their_last_key() -> None:
    table: multimap.MultiMap[str, str] = {}
    multimap.add(table, "zone", "a")
    multimap.add(table, "zone", "a")
    assert list(multimap.members(table, "zone")) == ["a"]
    multimap.discard(table, "zone", "missing")
    multimap.discard(table, "nowhere", "a")
    multimap.discard(table, "zone", "a")
    assert "zone" not in table
    assert list(multimap.members(table, "zone")) == []


def test_many_keys_under_one_value_stay_exact_past_the_small_size() -> None:
    table: multimap.MultiMap[str, int] = {}
    for key in range(3 * multimap.SMALL):
        multimap.add(table, "zone", key)
        assert sorted(multimap.members(table, "zone")) == list(range(key + 1))
    for key in range(3 * multimap.SMALL):
        multimap.discard(table, "zone", key)
    assert table == {}
