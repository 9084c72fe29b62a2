"""Which objects reference which: a Secret its accounts, an account its zones, a zone its records.

A change of a parent enqueues the objects that point at it (a Zone turning Ready lets its DNSRecords go on), and the
disappearance of a child enqueues its parents (a Zone waiting with `InUse` for its records goes on when the last
one is gone). It is also how a parent being deleted knows whether anything still uses it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple


class Ref(NamedTuple):
    kind: str
    namespace: str  # "" for cluster-scoped objects
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


@dataclass
class DependencyIndex:
    _parents: dict[Ref, tuple[Ref, ...]] = field(default_factory=dict)
    """A child's parents as a tuple: one or two each, where a frozenset was 216 bytes an object."""
    _children: defaultdict[Ref, set[Ref]] = field(default_factory=lambda: defaultdict(set))

    def set_parents(self, child: Ref, parents: Iterable[Ref]) -> frozenset[Ref]:
        """Record `child`'s current parents; returns the parents it no longer has."""
        new = tuple(sorted(set(parents)))
        old = self._parents.get(child, ())
        if new == old:
            return frozenset()
        for parent in old:
            if parent not in new:
                self._unlink(parent, child)
        for parent in new:
            if parent not in old:
                self._children[parent].add(child)
        if new:
            self._parents[child] = new
        else:
            self._parents.pop(child, None)
        return frozenset(old).difference(new)

    def remove(self, child: Ref) -> frozenset[Ref]:
        """Forget `child`; returns its former parents."""
        old = self._parents.pop(child, ())
        for parent in old:
            self._unlink(parent, child)
        return frozenset(old)

    def _unlink(self, parent: Ref, child: Ref) -> None:
        children = self._children.get(parent)
        if children is not None:
            children.discard(child)
            if not children:
                del self._children[parent]

    def children(self, parent: Ref, kind: str | None = None) -> list[Ref]:
        found = self._children.get(parent, set())
        return sorted(c for c in found if kind is None or c.kind == kind)

    def parents(self, child: Ref) -> frozenset[Ref]:
        return frozenset(self._parents.get(child, ()))
