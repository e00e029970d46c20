"""A server's whole auth setup from its config keys: the store, the checker, the admin requests, the signer.

`BrokerController` builds one with `ServerAuth.of_broker(config, config_dir)`: it loads the users and ACLs
(`load()`, creating `initAuthenticationUser` and the inner client's user as SUPER when absent, loading ACL 1.0
and migrating it when asked), installs the checker on the dispatcher before the metrics wrap it
(`install()`), serves 3001-3010 (`routes()`), reloads plain_acl.yml while running (`run()`), and hands its
`credentials` (innerClientAuthenticationCredentials) to the broker's RemotingClient, which signs the
registration to the NameServers, the slave's metadata sync and the restore requests with them. The NameServer
uses the same class with no config dir (`of_namesrv`): its users live in memory, from its own keys.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from broker.auth.admin import AuthAdmin
from broker.auth.checker import AuthChecker, AuthSettings
from broker.auth.model import AuthError, User, UserType
from broker.auth.plain import PlainAcl, migrate_to_v2
from broker.auth.settings import parse_codes, parse_credentials, parse_init_user, parse_stateful
from broker.auth.store import AuthStore
from broker.protocol.codes import RequestCode
from broker.protocol.signature import Credentials
from broker.transport.dispatcher import Dispatcher, Handler

__all__ = ["NAMESRV_WRITES", "PLAIN_RELOAD_INTERVAL", "ServerAuth", "rocketmq_home"]

log = logging.getLogger(__name__)

PLAIN_RELOAD_INTERVAL = 2.0
_rc = RequestCode
#: The NameServer requests that change something: signed when its authenticationEnabled is on.
NAMESRV_WRITES = frozenset(
    {
        _rc.PUT_KV_CONFIG,
        _rc.DELETE_KV_CONFIG,
        _rc.REGISTER_BROKER,
        _rc.UNREGISTER_BROKER,
        _rc.BROKER_HEARTBEAT,
        _rc.WIPE_WRITE_PERM_OF_BROKER,
        _rc.ADD_WRITE_PERM_OF_BROKER,
        _rc.DELETE_TOPIC_IN_NAMESRV,
        _rc.REGISTER_TOPIC_IN_NAMESRV,
        _rc.UPDATE_NAMESRV_CONFIG,
        _rc.GET_NAMESRV_CONFIG,  # not a write, but it lists the configuration: kept for the same users
    }
)


def rocketmq_home() -> Path:
    """$ROCKETMQ_HOME, where conf/plain_acl.yml lives (RocketMQ: rocketmq.home.dir, then the variable)."""
    return Path(os.environ.get("ROCKETMQ_HOME") or os.getcwd())


class ServerAuth:
    def __init__(
        self,
        settings: AuthSettings,
        store: AuthStore,
        *,
        init_user: User | None = None,
        credentials: Credentials | None = None,
        plain: PlainAcl | None = None,
        acl_enable: bool = False,
        migrate_from_v1: bool = False,
    ) -> None:
        self.settings = settings
        self.store = store
        self.init_user = init_user
        self.credentials = credentials
        self.plain = plain
        self.migrate_from_v1 = migrate_from_v1
        # ACL 1.0 checks only with aclEnable; migrateAuthFromV1Enabled alone reads the files to import them
        self.checker = AuthChecker(settings, store, plain if acl_enable else None)
        self.admin = AuthAdmin(store)

    @classmethod
    def of_broker(cls, config: Any, config_dir: Path | None, home: Path | None = None) -> ServerAuth:
        """From a BrokerConfig (broker.server.config): the ACL 2.0 keys, aclEnable and migrateAuthFromV1Enabled."""
        settings = AuthSettings(
            authentication=config.authentication_enabled,
            authorization=config.authorization_enabled,
            authentication_whitelist=parse_codes(config.authentication_whitelist, "authenticationWhitelist"),
            authorization_whitelist=parse_codes(config.authorization_whitelist, "authorizationWhitelist"),
            cluster=config.broker_cluster_name,
            stateful_seconds=(
                float(config.stateful_authentication_cache_expired_second)
                if parse_stateful(config.authentication_strategy)
                else None
            ),
        )
        plain = PlainAcl(home or rocketmq_home()) if config.acl_enable or config.migrate_auth_from_v1_enabled else None
        return cls(
            settings,
            AuthStore(config_dir),
            init_user=parse_init_user(config.init_authentication_user),
            credentials=parse_credentials(config.inner_client_authentication_credentials),
            plain=plain,
            acl_enable=config.acl_enable,
            migrate_from_v1=config.migrate_auth_from_v1_enabled,
        )

    @classmethod
    def of_namesrv(cls, config: Any) -> ServerAuth:
        """From a NamesrvConfig: with authenticationEnabled its writes (`NAMESRV_WRITES`) need a signature by
        initAuthenticationUser's user or innerClientAuthenticationCredentials' (the brokers sign with it); reads
        stay open. The users live in memory: the keys are their only source, read at each start."""
        settings = AuthSettings(
            authentication=config.authentication_enabled,
            authentication_whitelist=parse_codes(config.authentication_whitelist, "authenticationWhitelist"),
            authenticated_codes=NAMESRV_WRITES,
        )
        return cls(
            settings,
            AuthStore(None),
            init_user=parse_init_user(config.init_authentication_user.get_secret_value()),
            credentials=parse_credentials(config.inner_client_authentication_credentials.get_secret_value()),
        )

    @property
    def active(self) -> bool:
        return self.checker.active

    def load(self) -> None:
        store = self.store
        store.load()
        for user, why in ((self.init_user, "initAuthenticationUser"), (self._inner_user(), "the inner client")):
            if user is None:
                continue
            try:
                if store.ensure_user(user):
                    log.info("created the SUPER user %s (%s)", user.username, why)
            except AuthError as exc:
                log.error("cannot create the user of %s: %s", why, exc)
        if self.plain is not None:
            self.plain.load()
            if self.migrate_from_v1:
                count = migrate_to_v2(self.plain, store)
                if count:
                    log.info("migrated %d ACL 1.0 accounts to ACL 2.0", count)
        if self.active:
            s = self.settings
            log.info(
                "auth: authentication %s, authorization %s, ACL 1.0 %s, %d users, %d ACLs",
                "on" if s.authentication else "off",
                "on" if s.authorization else "off",
                "on" if self.checker.plain is not None else "off",
                len(store.users),
                len(store.acls),
            )

    def _inner_user(self) -> User | None:
        c = self.credentials
        return None if c is None else User(c.access_key, c.secret_key, UserType.SUPER)

    def install(self, dispatcher: Dispatcher) -> None:
        """Guard every request of `dispatcher` (call before broker.metrics.rpc.instrument wraps its routes)."""
        if self.active:
            dispatcher.set_guard(self.checker.guard)

    def routes(self) -> dict[int, Handler]:
        return dict(self.admin.routes())

    async def run(self) -> None:
        """Hot reload of ACL 1.0's files (a task of the server while it runs)."""
        plain = self.plain
        if plain is None:
            return
        while True:
            await asyncio.sleep(PLAIN_RELOAD_INTERVAL)
            try:
                plain.reload_if_changed()
            except Exception:
                log.exception("ACL 1.0 reload failed; keeping the previous config")
