"""Namespaces: an Iceberg namespace is a lakecore namespace, nested to any depth.

Rules:

* **One lakehouse object per namespace.** Its properties are the namespace definition's
  properties. ``("a", "b")`` is the lakecore namespace ``a.b`` (``lakecore.core.namespaces``);
  creating one creates its missing parents (empty), as pyiceberg's SQL catalog lets a child
  exist without one; ``list_namespaces(parent)`` gives the direct children, one seek per child
  whatever lies deeper; a namespace with children or tables cannot be dropped.
* **A new name is checked** (``_new_namespace``): no empty level, no ``.`` in a level, and the
  lakehouse's name rule (length, no space or control character).
* **A namespace's folder is where its tables go:** ``<warehouse>/<levels>``, or its
  ``location`` property. The ``location`` is held to the tables' rule when it is set
  (``lakecore.iceberg.path_rules``), not found wrong at every later create; and neither folder
  may equal or lie inside a table's root nor lie in another lakehouse's warehouse
  (``lakecore.iceberg.placement``). A ``location`` is recorded in the registry, and forgotten
  with it.
* Errors carry pyiceberg's own wording where its suite asserts one (``Namespace ns is not
  empty``, ``Namespace ns does not exists``).
"""

from __future__ import annotations

from typing import Any

from pyiceberg.catalog import LOCATION, PropertiesUpdateSummary
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchNamespaceError
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from lakecore.core import namespaces as NS
from lakecore.iceberg.errors import translated
from lakecore.iceberg.path_rules import normalize_location
from lakecore.iceberg.placement import PlacementRules
from lakecore.iceberg.table_folders import namespace_location_key
from lakecore.lakehouse import Transaction


class NamespaceOps(PlacementRules):
    """The namespace operations of the catalog (see the module docstring)."""

    def create_namespace(
        self, namespace: str | Identifier, properties: Properties = EMPTY_DICT
    ) -> None:
        """Create a namespace with ``properties``; ``("a", "b")`` is ``b`` inside ``a``, and a
        missing parent is created with it (empty), as pyiceberg's SQL catalog lets a child
        exist without one.

        Raises:
            NamespaceAlreadyExistsError: it exists.
            NoSuchNamespaceError: an empty identifier or level.
            ValidationError: a level holds ``.``, or the name is too long or holds a space or
                a control character.
        """
        self._refuse_read_only("create_namespace")
        ns = self._new_namespace(namespace)
        self._check_namespace_location(properties)

        def create(tx: Transaction) -> None:
            tx.create_namespace(ns, dict(properties), parents=True)
            default_folder = "/".join([self.warehouse, *NS.levels(ns)])
            self._check_namespace_folder(tx, ns, default_folder, "the folder")
            self._register_namespace_location(tx, ns, properties.get(LOCATION))

        self._change("create_namespace", create, exists=NamespaceAlreadyExistsError)

    def _register_namespace_location(self, tx: Transaction, ns: str, location: Any) -> None:
        """Record (or with None, forget) a namespace's own folder in the registry."""
        key = namespace_location_key(ns)
        if location:
            folder = normalize_location(str(location))
            self._check_namespace_folder(tx, ns, folder, "the location")
            tx.set_definition_properties({key: folder})
        elif tx.definition_property(key) is not None:
            tx.set_definition_properties({key: None})

    def drop_namespace(self, namespace: str | Identifier) -> None:
        """Drop an empty namespace.

        Raises:
            NoSuchNamespaceError: it does not exist.
            NamespaceNotEmptyError: it still holds tables or namespaces.
        """
        self._refuse_read_only("drop_namespace")
        ns = self._namespace(namespace)

        def drop(tx: Transaction) -> None:
            tx.drop_namespace(ns)
            self._register_namespace_location(tx, ns, None)

        self._change(
            "drop_namespace",
            drop,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
            not_empty_wording=f"Namespace {ns} is not empty",
        )

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        """The direct children of ``namespace`` (the top-level namespaces without one), sorted.
        One seek per child, whatever lies deeper (``lakecore.core.namespaces``).

        Raises:
            NoSuchNamespaceError: ``namespace`` is given and does not exist.
        """
        parent = self._namespace(namespace) if namespace else None
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=None if parent is None else f"Namespace does not exist: {parent}",
            ),
        ):
            return [tuple(NS.levels(child)) for child in self._read().child_namespaces(parent)]

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        """The namespace's properties.

        Raises:
            NoSuchNamespaceError: it does not exist.
        """
        ns = self._namespace(namespace)
        with (
            translated(
                not_found=NoSuchNamespaceError,
                invalid=NoSuchNamespaceError,
                wording=f"Namespace {ns} does not exists",
            ),
        ):
            return dict(self._read().load_namespace(ns).properties)

    def update_namespace_properties(
        self,
        namespace: str | Identifier,
        removals: set[str] | None = None,
        updates: Properties = EMPTY_DICT,
    ) -> PropertiesUpdateSummary:
        """Remove ``removals`` and set ``updates`` in one commit.

        Raises:
            NoSuchNamespaceError: it does not exist.
            ValueError: ``removals`` and ``updates`` overlap.
        """
        self._refuse_read_only("update_namespace_properties")
        ns = self._namespace(namespace)
        self._check_namespace_location(updates)

        def update(tx: Transaction) -> PropertiesUpdateSummary:
            current = dict(tx.load_namespace(ns).properties)
            summary, _ = self._get_updated_props_and_update_summary(current, removals, updates)
            tx.update_namespace(ns, dict(updates), remove_properties=removals or ())
            if LOCATION in updates or LOCATION in (removals or ()):
                self._register_namespace_location(tx, ns, updates.get(LOCATION))
            return summary

        return self._change(
            "update_namespace_properties",
            update,
            not_found=NoSuchNamespaceError,
            invalid=NoSuchNamespaceError,
            wording=f"Namespace {ns} does not exists",
        )

    def _check_namespace_location(self, properties: Properties) -> None:
        """A namespace's ``location`` is where its tables go by default: held to the tables'
        rule when it is set, not found wrong at every later create."""
        location = properties.get(LOCATION)
        if location:
            self.check_location(str(location), "namespace location")


__all__ = ["NamespaceOps"]
