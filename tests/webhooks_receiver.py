"""A real HTTPS webhook receiver on loopback for the webhook tests.

Its certificate is issued by a throw-away CA made here with `cryptography`; Prism trusts that CA through
PRISM_WEBHOOK_CA_BUNDLE, exactly as an operator would for a receiver with a private CA. Each test scripts
the answers (status, headers, delay) per path and reads back what arrived.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import socket
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> TlsFiles:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Prism test receiver CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = TlsFiles(directory / "ca.pem", directory / "receiver.pem", directory / "receiver.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: str = "ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class Receiver:
    """Answers scripted per path (`script(path, [...])`, then the default); records every request."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._scripts: dict[str, deque[Answer]] = defaultdict(deque)
        self.default = Answer()
        self.port = 0
        self.arrived = asyncio.Event()

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"

    def script(self, path: str, answers: list[Answer]) -> None:
        self._scripts[path] = deque(answers)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def wait_for(self, path: str, count: int, within: float = 10.0) -> list[Received]:
        async with asyncio.timeout(within):
            while len(self.at(path)) < count:
                self.arrived.clear()
                await self.arrived.wait()
        return self.at(path)

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        self.received.append(Received(request.url.path, dict(request.headers), body,
                                      asyncio.get_running_loop().time()))
        self.arrived.set()
        queue = self._scripts.get(request.url.path)
        answer = queue.popleft() if queue else self.default
        if answer.delay:
            await asyncio.sleep(answer.delay)
        return Response(answer.body, status_code=answer.status, headers=answer.headers)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=["POST", "GET"])])


class RunningReceiver:
    def __init__(self, tls: TlsFiles) -> None:
        self.receiver = Receiver()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.receiver.port = sock.getsockname()[1]
        config = uvicorn.Config(self.receiver.app(), ssl_certfile=str(tls.cert), ssl_keyfile=str(tls.key),
                                log_level="error", lifespan="off", timeout_graceful_shutdown=1)
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> Receiver:
        self.task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:  # noqa: ASYNC110 -- uvicorn offers no event to wait on
            await asyncio.sleep(0.01)
        return self.receiver

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await self.task
        self.sock.close()
