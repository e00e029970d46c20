"""Changing spec.storage.size of persistent volumes, which a StatefulSet cannot do by itself.

The API server refuses any edit of a StatefulSet's volumeClaimTemplates, so a size change is carried out
around it, group by group:
- growth, where the claims' StorageClass allows volume expansion: every claim of the group is patched to the
  new size (the storage driver grows the volume, and the kubelet its filesystem), then the StatefulSet is
  deleted with its pods orphaned and applied again with the new template, which adopts them. No pod restarts.
- growth where the class does not allow expansion (or could not be read), and any shrink: refused, with the
  StorageResizeBlocked condition saying why. The group's StatefulSet keeps the size its claims were made
  with, so every other change of the spec (image, config, replicas) still applies.
An emptyDir's sizeLimit is part of the pod template: changing it rolls the pods like any template change.
A resize waits for a roll or scale-in under way (it is done between them, never during one).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketcluster.plan_types import Action, RecreateStatefulSet, ResizeClaims
from rocketcluster.plan_view import ClusterView
from rocketcluster.quantity import parse_quantity

__all__ = ["StorageStep", "plan_storage"]


@dataclass(frozen=True, slots=True)
class StorageStep:
    """`kept_sizes`: (group, claim size) for StatefulSets to apply with the size they have, not the spec's;
    `blocked`: the StorageResizeBlocked (reason, message), if any."""

    actions: tuple[Action, ...] = ()
    kept_sizes: tuple[tuple[int, str], ...] = ()
    blocked: tuple[str, str] | None = None
    status: str | None = None


def plan_storage(view: ClusterView, busy: bool) -> StorageStep:
    """`busy`: a roll or a scale-in is under way, so a resize waits."""
    observed = view.observed
    if observed.ephemeral:
        return StorageStep()
    wanted = parse_quantity(observed.storage_size)
    # every StatefulSet is applied with the size it has (the same value spelled otherwise, 10Gi for 10240Mi,
    # included); only a re-created one gets the spec's
    sizes = {g: size for g in view.kept if (size := view.groups[g].claim_size) is not None}
    kept = tuple(sorted((g, size) for g, size in sizes.items() if size != observed.storage_size))
    changed = {g: size for g, size in sizes.items() if parse_quantity(size) != wanted}
    if not changed:
        return StorageStep(kept_sizes=kept)
    shrunk = {g: size for g, size in changed.items() if parse_quantity(size) > wanted}
    if shrunk:
        listed = ", ".join(f"group {g} {size}" for g, size in sorted(shrunk.items()))
        message = (
            f"spec.storage.size {observed.storage_size} is smaller than the volumes ({listed}): a volume never "
            "shrinks; they keep their size (set spec.storage.size back to it)"
        )
        return StorageStep(kept_sizes=kept, blocked=("VolumeShrinkNotAllowed", message))
    if observed.volume_expansion is not True:
        why = "could not be read" if observed.volume_expansion is None else "does not allow volume expansion"
        message = (
            f"spec.storage.size {observed.storage_size}: the volumes' StorageClass {why} (allowVolumeExpansion), "
            f"so the volumes keep their size ({', '.join(sorted(set(changed.values())))}); set spec.storage.size "
            "back to it, or use a class that allows expansion"
        )
        return StorageStep(kept_sizes=kept, blocked=("VolumeExpansionNotAllowed", message))
    if busy:
        status = f"growing the volumes to {observed.storage_size} waits for the change under way"
        return StorageStep(kept_sizes=kept, status=status)
    actions: list[Action] = []
    for g in sorted(changed):
        actions += [ResizeClaims(g, observed.storage_size), RecreateStatefulSet(g)]
    status = f"growing the volumes of broker groups {sorted(changed)} to {observed.storage_size}"
    return StorageStep(tuple(actions), kept, status=status)
