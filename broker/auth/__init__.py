"""Authentication and authorization (RocketMQ's ACL 2.0, and ACL 1.0 for 4.x users), below the server.

The broker and the NameServer build an `AuthChecker` from their config and install its guard on their
request dispatcher; the broker also serves the admin requests 3001-3010 (`AuthAdmin`) over an `AuthStore`
(JSON files beside the broker's other metadata). Clients sign with broker.protocol.signature, never with this
package. Layers: this package imports the store (its file writer) and the protocol only.
"""

from __future__ import annotations

from broker.auth.admin import AuthAdmin
from broker.auth.checker import AuthChecker, AuthSettings, source_ip
from broker.auth.model import Acl, Action, AuthError, Decision, Policy, PolicyEntry, PolicyType, Resource, User
from broker.auth.store import AuthStore

__all__ = [
    "Acl",
    "Action",
    "AuthAdmin",
    "AuthChecker",
    "AuthError",
    "AuthSettings",
    "AuthStore",
    "Decision",
    "Policy",
    "PolicyEntry",
    "PolicyType",
    "Resource",
    "User",
    "source_ip",
]
