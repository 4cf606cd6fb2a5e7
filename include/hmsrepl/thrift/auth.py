"""The Thrift port's front door: start-up policy, TLS, Kerberos (SASL GSSAPI) and who a connection is.

Threat model: anyone who can reach the port. Without authentication the user is whatever ``set_ugi`` claims,
so an unauthenticated server listens on loopback only unless the operator says ``--insecure``. With
``HMSREPL_THRIFT_AUTH=kerberos`` every connection must complete Hive's SASL GSSAPI negotiation (RFC 4752)
before its first call; the connection's user is the principal's short name, and ``set_ugi`` may
only name the same user or someone the principal may impersonate (``HMSREPL_PROXY_USERS``, Hadoop's
``hadoop.proxyuser.<user>.users/hosts``). ``HMSREPL_THRIFT_SASL_QOP`` raises the minimum protection to
integrity (``auth-int``) or encryption (``auth-conf``) of every frame, Hive's ``hadoop.rpc.protection``. TLS (``HMSREPL_THRIFT_TLS_CERT``/``_KEY``, Hive's
``hive.metastore.use.SSL``) encrypts the connection and authenticates the server to the client.

``ThriftSecurity`` holds the TLS context and the acceptor credentials; the server's event-driven front end
(``thrift.frontend``) runs the TLS handshake and feeds ``ThriftSecurity.negotiation`` message by message, and
``ThriftSecurity.negotiated`` gives the identity the handler authorizes with.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hmsrepl.exceptions import HmsReplError
from hmsrepl.thrift.sasl import (
    SaslError,
    ServerNegotiation,
    TSaslTransport,
    negotiate_client,
)

if TYPE_CHECKING:
    from hmsrepl.config import MetastoreConfig

log = logging.getLogger(__name__)

#: A client must finish TLS and SASL within this long (and start them within thrift_handshake_seconds).
HANDSHAKE_TIMEOUT_SECONDS = 30.0
#: RFC 4752 security layers by SASL QOP name (bit masks in the offer, one bit in the answer).
QOP_LAYERS = {"auth": 1, "auth-int": 2, "auth-conf": 4}
#: Hive's Java transport wraps whole frames whatever size is announced; announce the largest (3 bytes).
_MAX_BUFFER = 0xFFFFFF


def offered_layers(minimum: str) -> int:
    """The layers a server requiring at least ``minimum`` offers: that one and every stronger one."""
    return sum(bit for name, bit in QOP_LAYERS.items() if bit >= QOP_LAYERS[minimum])


class SecuritySettingError(HmsReplError):
    """The server's security settings are missing, inconsistent or unsafe: it refuses to start."""


class AuthenticationError(Exception):
    """A connection failed TLS or SASL; it is closed and the server goes on serving others."""


@dataclass(frozen=True)
class Peer:
    """Who is on the other end of one connection."""

    host: str
    #: The authenticated Kerberos principal (``alice/host@REALM``); ``None`` when the port has no auth.
    principal: str | None = None
    #: Its short name (``alice``), the user it acts as unless ``set_ugi`` narrows it.
    user: str | None = None
    #: The SASL protection of its frames (auth, auth-int, auth-conf); None without SASL.
    qop: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.user is not None


# -- start-up policy ------------------------------------------------------------------------------------------
def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address (an empty host is the wildcard)."""
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def check_bind(config: MetastoreConfig, host: str, port: int) -> None:
    """Refuse to serve an unauthenticated port beyond loopback unless the operator opted in."""
    if config.thrift_auth != "none" or config.thrift_insecure or is_loopback(host):
        return
    raise SecuritySettingError(
        f"refusing to serve thrift://{host}:{port} without authentication: anyone who reaches it may act as any "
        "user; set HMSREPL_THRIFT_AUTH=kerberos (with HMSREPL_KERBEROS_PRINCIPAL and HMSREPL_KERBEROS_KEYTAB), "
        "bind to 127.0.0.1, or pass --insecure (HMSREPL_THRIFT_INSECURE=true) on a trusted network"
    )


# -- principals and proxy users -------------------------------------------------------------------------------
def split_principal(principal: str) -> tuple[str, str | None, str | None]:
    """``primary/instance@REALM`` as (primary, instance, realm)."""
    name, _, realm = principal.partition("@")
    primary, _, instance = name.partition("/")
    return primary, instance or None, realm or None


def server_principal(principal: str, host: str | None = None) -> str:
    """``_HOST`` replaced by ``host`` (a client: the host it connects to) or this machine's name, lowercased,
    as Hadoop's ``SecurityUtil.getServerPrincipal`` does."""
    if "_HOST" not in principal:
        return principal
    if not host or host in ("0.0.0.0", "::"):
        host = socket.getfqdn()
    return principal.replace("_HOST", host.lower())


@dataclass(frozen=True)
class ProxyRule:
    users: frozenset[str]
    hosts: tuple[Any, ...]  # "*" or ip_network objects
    any_host: bool

    def allows(self, user: str, host: str) -> bool:
        if "*" not in self.users and user not in self.users:
            return False
        if self.any_host:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.hosts)


def parse_proxy_users(raw: dict[str, dict[str, list[str]]]) -> dict[str, ProxyRule]:
    """``{"svc": {"users": [...], "hosts": [...]}}``: hosts are addresses, networks or names (resolved now)."""
    rules: dict[str, ProxyRule] = {}
    for proxy, rule in raw.items():
        unknown = set(rule) - {"users", "hosts"}
        if unknown:
            raise SecuritySettingError(
                f"HMSREPL_PROXY_USERS['{proxy}'] has unknown keys {sorted(unknown)}; use 'users' and 'hosts'"
            )
        hosts = list(rule.get("hosts", []))
        networks: list[Any] = []
        for entry in hosts:
            if entry == "*":
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                try:
                    addresses = {info[4][0] for info in socket.getaddrinfo(entry, None)}
                except OSError:
                    raise SecuritySettingError(
                        f"HMSREPL_PROXY_USERS['{proxy}'].hosts: '{entry}' is neither an address, a network nor "
                        "a resolvable host name"
                    ) from None
                networks.extend(ipaddress.ip_network(a.split("%")[0]) for a in addresses)
        rules[proxy] = ProxyRule(frozenset(rule.get("users", [])), tuple(networks), "*" in hosts)
    return rules


# -- GSSAPI (RFC 4752) ---------------------------------------------------------------------------------------
class GssapiServer:
    """The acceptor side of SASL GSSAPI for one connection: context establishment, then the security layer."""

    name = "GSSAPI"

    def __init__(self, credentials: Any, realm: str | None, layers: int = QOP_LAYERS["auth"]) -> None:
        import gssapi

        self._ctx = gssapi.SecurityContext(creds=credentials, usage="accept")
        self._realm = realm
        self._layers = layers
        self._stage = 0
        self.principal: str | None = None
        self.layer = 0

    def frame_codec(self) -> tuple[Any, Any] | None:
        """(wrap, unwrap) for data frames under the chosen layer; None for QOP auth (plain frames)."""
        return _frame_codec(self._ctx, self.layer)

    @property
    def complete(self) -> bool:
        return self._stage == 3

    def evaluate(self, response: bytes) -> bytes | None:
        import gssapi.exceptions

        try:
            if self._stage == 0:
                token = self._ctx.step(response)
                if not self._ctx.complete:
                    return token or b""
                self.principal = str(self._ctx.initiator_name)
                _, _, realm = split_principal(self.principal)
                if self._realm and realm != self._realm:
                    raise SaslError(
                        f"principal {self.principal} is not of realm {self._realm}; no cross-realm mapping is "
                        "configured"
                    )
                self._stage = 1
                if token:  # mutual authentication: the client answers this token with an empty response
                    return token
            if self._stage == 1:
                self._stage = 2
                offer = bytes([self._layers]) + struct.pack(">I", _MAX_BUFFER)[1:]
                return self._ctx.wrap(offer, False).message
            if self._stage == 2:
                answer = self._ctx.unwrap(response).message
                if len(answer) < 4 or answer[0] not in QOP_LAYERS.values() or not answer[0] & self._layers:
                    offered = [name for name, bit in QOP_LAYERS.items() if bit & self._layers]
                    raise SaslError(
                        f"the client chose a SASL security layer this metastore does not accept; it accepts QOP "
                        f"{offered} (HMSREPL_THRIFT_SASL_QOP)"
                    )
                self.layer = answer[0]
                authzid = answer[4:].decode("utf-8", "replace")
                if authzid and authzid != self.principal:
                    raise SaslError(
                        f"principal {self.principal} may not authorize as {authzid!r}; use set_ugi and "
                        "HMSREPL_PROXY_USERS to act for another user"
                    )
                self._stage = 3
                return None
        except gssapi.exceptions.GSSError as exc:
            raise SaslError(f"Kerberos authentication failed: {_gss_reason(exc)}") from None
        raise SaslError("unexpected SASL message after the negotiation completed")


class GssapiClient:
    """The initiator side of SASL GSSAPI from the caller's Kerberos credentials, asking for one QOP."""

    name = "GSSAPI"

    def __init__(self, service_principal: str, credentials: Any = None, qop: str = "auth") -> None:
        import gssapi

        target = gssapi.Name(service_principal, gssapi.NameType.kerberos_principal)
        flags = [
            gssapi.RequirementFlag.mutual_authentication,
            gssapi.RequirementFlag.integrity,
            gssapi.RequirementFlag.confidentiality,
        ]
        self._ctx = gssapi.SecurityContext(name=target, creds=credentials, usage="initiate", flags=flags)
        self.qop = qop
        self.layer = 0

    def initial_response(self) -> bytes:
        return self._ctx.step() or b""

    def evaluate(self, challenge: bytes) -> tuple[bytes, bool]:
        if not self._ctx.complete:
            return self._ctx.step(challenge) or b"", False
        offer = self._ctx.unwrap(challenge).message
        wanted = QOP_LAYERS[self.qop]
        if len(offer) < 4 or not offer[0] & wanted:
            offered = [name for name, bit in QOP_LAYERS.items() if offer and bit & offer[0]]
            raise SaslError(f"the metastore does not offer SASL QOP '{self.qop}' (it offers {offered})")
        self.layer = wanted
        return self._ctx.wrap(bytes([wanted, 0, 0, 0]), False).message, True

    def frame_codec(self) -> tuple[Any, Any] | None:
        return _frame_codec(self._ctx, self.layer)


def _frame_codec(ctx: Any, layer: int) -> tuple[Any, Any] | None:
    """GSS wrap/unwrap of whole frames, as Hive's TSaslTransport does under auth-int / auth-conf."""
    if layer in (0, QOP_LAYERS["auth"]):
        return None
    encrypt = layer == QOP_LAYERS["auth-conf"]

    def wrap(data: bytes) -> bytes:
        return ctx.wrap(data, encrypt).message

    def unwrap(data: bytes) -> bytes:
        result = ctx.unwrap(data)
        if encrypt and not result.encrypted:
            raise SaslError("a frame arrived unencrypted under QOP auth-conf")
        return result.message

    return wrap, unwrap


def _gss_reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:300]


def client_credentials(
    principal: str | None = None, keytab: str | None = None, ccache: str | None = None
) -> Any:
    """Initiator credentials: from ``keytab`` for ``principal`` (a kinit into ``ccache``, e.g. a private
    ``FILE:`` path), else from the ticket cache (``ccache`` or the default one)."""
    import gssapi

    store: dict[str, str] = {}
    if keytab:
        store["client_keytab"] = keytab
    if ccache:
        store["ccache"] = ccache
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal) if principal else None
    return gssapi.Credentials(name=name, usage="initiate", store=store or None)


# -- the server side ------------------------------------------------------------------------------------------
class ThriftSecurity:
    """Turns accepted sockets into (transport, peer) following the configured TLS and authentication."""

    def __init__(self, config: MetastoreConfig) -> None:
        self.config = config
        self.proxy_rules = parse_proxy_users(config.proxy_users)
        self.tls: ssl.SSLContext | None = None
        if config.thrift_tls_cert or config.thrift_tls_key:
            if not (config.thrift_tls_cert and config.thrift_tls_key):
                raise SecuritySettingError(
                    "TLS needs both HMSREPL_THRIFT_TLS_CERT and HMSREPL_THRIFT_TLS_KEY (PEM files)"
                )
            self.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.tls.minimum_version = ssl.TLSVersion.TLSv1_2
            try:
                self.tls.load_cert_chain(config.thrift_tls_cert, config.thrift_tls_key)
            except (OSError, ssl.SSLError) as exc:
                raise SecuritySettingError(
                    f"cannot load the TLS certificate {config.thrift_tls_cert} / key {config.thrift_tls_key}: "
                    f"{exc}; check HMSREPL_THRIFT_TLS_CERT and HMSREPL_THRIFT_TLS_KEY"
                ) from None
        self._credentials: Any = None
        self._realm: str | None = None
        if config.thrift_auth == "kerberos":
            self._credentials, self._realm = self._acceptor_credentials()

    def _acceptor_credentials(self) -> tuple[Any, str]:
        principal, keytab = self.config.kerberos_principal, self.config.kerberos_keytab
        _, _, realm = split_principal(principal)
        if not principal or not realm or not keytab:
            raise SecuritySettingError(
                "HMSREPL_THRIFT_AUTH=kerberos needs HMSREPL_KERBEROS_PRINCIPAL (service/_HOST@REALM) and "
                "HMSREPL_KERBEROS_KEYTAB (a keytab with its keys)"
            )
        import gssapi
        import gssapi.exceptions

        resolved = server_principal(principal)
        try:
            name = gssapi.Name(resolved, gssapi.NameType.kerberos_principal)
            creds = gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})
            creds.inquire()  # fails now, not at the first client, when the keytab lacks the key
        except gssapi.exceptions.GSSError as exc:
            raise SecuritySettingError(
                f"cannot use Kerberos principal {resolved} from keytab {keytab}: {_gss_reason(exc)}; check "
                "HMSREPL_KERBEROS_PRINCIPAL and HMSREPL_KERBEROS_KEYTAB"
            ) from None
        return creds, realm

    @property
    def kerberos(self) -> bool:
        return self._credentials is not None

    def describe(self) -> str:
        parts = ["TLS" if self.tls else "no TLS"]
        parts.append(
            f"Kerberos as {server_principal(self.config.kerberos_principal)}" if self.kerberos else "no auth"
        )
        return ", ".join(parts)

    def negotiation(self) -> ServerNegotiation:
        """A fresh SASL negotiation for one connection (the event-driven server feeds it message by message)."""
        layers = offered_layers(self.config.thrift_sasl_qop)
        return ServerNegotiation({"GSSAPI": lambda: GssapiServer(self._credentials, self._realm, layers)})

    def negotiated(self, host: str, negotiation: ServerNegotiation) -> tuple[Peer, tuple[Any, Any] | None]:
        """The peer a completed ``negotiation`` authenticated, and the (wrap, unwrap) of its frames."""
        mechanism: Any = negotiation.mechanism
        principal = mechanism.principal
        qop = next(name for name, bit in QOP_LAYERS.items() if bit == mechanism.layer)
        return Peer(host, principal, split_principal(principal)[0], qop), mechanism.frame_codec()

    def may_impersonate(self, peer: Peer, user: str) -> bool:
        """Whether ``peer`` may act as ``user`` (``set_ugi``): itself always, others by a proxy-user rule."""
        if not peer.authenticated or user == peer.user:
            return True
        rule = self.proxy_rules.get(peer.user or "")
        return rule is not None and rule.allows(user, peer.host)


# -- the client side (the Airflow hook, tests, benchmarks) ----------------------------------------------------
def connect(
    host: str,
    port: int,
    *,
    kerberos_principal: str | None = None,
    credentials: Any = None,
    tls_ca: str | None = None,
    timeout_ms: int | None = 60_000,
    qop: str = "auth",
) -> Any:
    """A metastore Thrift client over TLS (verified against ``tls_ca``) and/or SASL GSSAPI to the server's
    ``kerberos_principal`` (``_HOST`` becomes ``host``) with SASL QOP ``qop``, as Hive's client connects."""
    from thriftpy2.protocol import TCyBinaryProtocolFactory
    from thriftpy2.thrift import TClient
    from thriftpy2.transport import TCyBufferedTransport, TSocket

    from hmsrepl.thrift.idl import Service

    sock = TSocket(host, port, socket_timeout=timeout_ms, connect_timeout=timeout_ms)
    sock.open()
    try:
        if tls_ca:
            context = ssl.create_default_context(cafile=tls_ca)
            sock.sock = context.wrap_socket(sock.sock, server_hostname=host)
        trans: Any = sock
        if kerberos_principal:
            mechanism = GssapiClient(server_principal(kerberos_principal, host), credentials, qop)
            negotiate_client(sock, mechanism)
            trans = TSaslTransport(sock, codec=mechanism.frame_codec())
    except BaseException:
        sock.close()
        raise
    protocol = TCyBinaryProtocolFactory().get_protocol(TCyBufferedTransport(trans))
    return TClient(Service, protocol)


__all__ = [
    "AuthenticationError",
    "Peer",
    "SecuritySettingError",
    "ThriftSecurity",
    "check_bind",
    "client_credentials",
    "connect",
    "is_loopback",
    "server_principal",
    "split_principal",
]
