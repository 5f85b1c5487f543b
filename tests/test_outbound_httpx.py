"""The official MCP client's HTTP goes through Prism's outbound guard (prism.kit.outbound_httpx): every connection
is resolved and vetted when it is made, not only when the session opens; and the transport behaves as httpx2's
own does for what the client relies on (TLS verification, kept-alive connections, errors, time limits)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import uvloop

from prism.kit.outbound import address_of, address_problem, resolve, ssl_context
from prism.kit.outbound_httpx import first_to_connect, guarded_transport
from tests.webhooks_receiver import Answer, Receiver, RunningReceiver, TlsFiles, make_tls


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return make_tls(tmp_path)


@pytest.fixture
async def receiver(tls: TlsFiles) -> AsyncIterator[Receiver]:
    running = RunningReceiver(tls)
    running.server.config.timeout_keep_alive = 1  # idle connections are closed by the server after a second
    received = await running.start()
    try:
        yield received
    finally:
        await running.stop()


def client(tls: TlsFiles, *, allow_private_networks: bool, timeout: float = 10.0,
           ca: bool = True) -> httpx2.AsyncClient:
    transport = guarded_transport(allow_private_networks=allow_private_networks,
                                  ssl_context=ssl_context(str(tls.ca) if ca else None))
    return httpx2.AsyncClient(transport=transport, timeout=timeout, trust_env=False)


async def test_a_name_that_resolves_to_loopback_is_refused_when_the_connection_is_made(
        tls: TlsFiles, receiver: Receiver) -> None:
    async with client(tls, allow_private_networks=False) as http:
        with pytest.raises(httpx2.ConnectError, match=r"refused by Prism: localhost is not a public address"):
            await http.get(receiver.url("/guarded", host="localhost"))
        with pytest.raises(httpx2.ConnectError, match=r"refused by Prism.*loopback"):
            await http.get(receiver.url("/guarded", host="127.0.0.1"))
    assert receiver.at("/guarded") == []


async def test_a_private_address_is_refused_without_a_connection_attempt(tls: TlsFiles) -> None:
    # 10.255.255.1 is not routed here: an attempt would hang until the time limit, a refusal is immediate.
    async with client(tls, allow_private_networks=False, timeout=30) as http:
        started = asyncio.get_running_loop().time()
        with pytest.raises(httpx2.ConnectError, match="a private network address"):
            await http.get("https://10.255.255.1/")
        assert asyncio.get_running_loop().time() - started < 5


async def test_allowed_private_targets_are_reached_over_verified_tls_on_kept_alive_connections(
        tls: TlsFiles, receiver: Receiver) -> None:
    receiver.script("/a", [Answer(body="first"), Answer(body="second")])
    async with client(tls, allow_private_networks=True) as http:
        first = await http.post(receiver.url("/a", host="localhost"), json={"n": 1})
        second = await http.post(receiver.url("/a", host="localhost"), json={"n": 2})
        assert (first.status_code, first.text, second.text) == (200, "first", "second")
        assert first.extensions["network_stream"] is second.extensions["network_stream"]  # one connection
        await asyncio.sleep(1.6)  # the server closes the idle connection: the next request opens another
        third = await http.post(receiver.url("/a", host="localhost"), json={"n": 3})
        assert third.status_code == 200
        assert third.extensions["network_stream"] is not first.extensions["network_stream"]
    assert [r.body for r in receiver.at("/a")] == [b'{"n":1}', b'{"n":2}', b'{"n":3}']


async def test_a_certificate_that_does_not_verify_is_a_connect_error(tls: TlsFiles, receiver: Receiver) -> None:
    async with client(tls, allow_private_networks=True, ca=False) as http:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await http.get(receiver.url("/untrusted"))
    assert receiver.at("/untrusted") == []


async def test_an_answer_that_does_not_come_is_a_read_timeout(tls: TlsFiles, receiver: Receiver) -> None:
    receiver.script("/slow", [Answer(delay=3)])
    async with client(tls, allow_private_networks=True, timeout=0.5) as http:
        with pytest.raises(httpx2.ReadTimeout):
            await http.get(receiver.url("/slow"))


async def test_nothing_listening_is_a_connect_error(tls: TlsFiles) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with client(tls, allow_private_networks=True) as http:
        with pytest.raises(httpx2.ConnectError, match=r"could not connect to 127\.0\.0\.1"):
            await http.get(f"https://127.0.0.1:{port}/")


async def test_an_idle_connection_on_which_bytes_arrived_is_not_used_again(tls: TlsFiles) -> None:
    """A server that writes onto a kept-alive connection nobody asked anything of (an unsolicited 408): those bytes
    are not the answer to the next request, which goes out on a new connection."""
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(tls.cert, tls.key)
    connections = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        first = connections == 1
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + (b"first" if first else b"fresh"))
            if first:
                await asyncio.sleep(0.2)
                writer.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 5\r\n\r\nstale")
                await reader.readuntil(b"\r\n\r\n")  # only if the client wrongly sends again on this connection
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nreuse")
            await writer.drain()
            await asyncio.sleep(2)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    try:
        async with client(tls, allow_private_networks=True) as http:
            first = await http.get(f"https://localhost:{port}/")
            await asyncio.sleep(0.5)
            second = await http.get(f"https://localhost:{port}/")
    finally:
        server.close()
    assert (first.status_code, first.text) == (200, "first")
    assert (second.status_code, second.text, connections) == (200, "fresh", 2)


async def test_the_next_address_is_tried_while_the_first_still_hangs() -> None:
    """A name's first address may drop every packet (a broken IPv6 route, say): the next is started a quarter of a
    second later rather than after the whole connect time."""
    answering = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = answering.sockets[0].getsockname()[1]
    # 127.0.0.2:port listens with a full accept queue, so the kernel drops further connection attempts: a black hole.
    hole = socket.socket()
    hole.bind(("127.0.0.2", port))
    hole.listen(0)
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.2", port))
        fillers.append(filler)
    try:
        started = asyncio.get_running_loop().time()
        async with asyncio.timeout(5):
            connection = await first_to_connect(["127.0.0.2", "127.0.0.1"], port, None)
        took = asyncio.get_running_loop().time() - started
        assert connection.transport.get_extra_info("peername")[0] == "127.0.0.1"
        assert took < 2, took
        connection.transport.close()
    finally:
        answering.close()
        for filler in fillers:
            filler.close()
        hole.close()


async def test_a_tls_handshake_that_does_not_come_is_a_connect_timeout(tls: TlsFiles) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with client(tls, allow_private_networks=True, timeout=0.5) as http:
            with pytest.raises(httpx2.ConnectTimeout):
                await http.get(f"https://localhost:{port}/")
    finally:
        server.close()


def test_the_transport_on_uvloop(tls: TlsFiles) -> None:
    """`prism serve` runs uvloop, whose transports differ from asyncio's own (a protocol hears of its connection
    only after `create_connection` returns; TLS is its own): the same requests there, on a real server."""
    async def scenario() -> None:
        running = RunningReceiver(tls)
        received = await running.start()
        try:
            received.script("/uv", [Answer(body="one"), Answer(body="two")])
            async with client(tls, allow_private_networks=True) as http:
                one = await http.get(received.url("/uv", host="localhost"))
                two = await http.get(received.url("/uv", host="localhost"))
            assert (one.text, two.text) == ("one", "two")
            assert one.extensions["network_stream"] is two.extensions["network_stream"]
            async with client(tls, allow_private_networks=False) as http:
                with pytest.raises(httpx2.ConnectError, match="localhost is not a public address"):
                    await http.get(received.url("/uv", host="localhost"))
            async with client(tls, allow_private_networks=True, ca=False) as http:
                with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    await http.get(received.url("/uv"))
        finally:
            await running.stop()
        assert len(received.at("/uv")) == 2

    uvloop.run(scenario())


def link_local_address() -> str | None:
    """A link-local IPv6 address of this machine, with its interface (`fe80::…%eth0`); None when it has none."""
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hex_address, _index, _prefix, scope, _flags, interface = line.split()
        if scope == "20":  # the link scope
            return f"{ipaddress.IPv6Address(bytes.fromhex(hex_address))}%{interface}"
    return None


async def test_a_link_local_address_keeps_its_zone_and_is_reached_only_where_private_networks_are_allowed() -> None:
    """getaddrinfo gives an IPv6 zone as the socket address's scope id, not in its text: without it a link-local
    address names no host (connecting fails), so it is kept; and such an address stays refused by default."""
    literal = link_local_address()
    if literal is None:
        pytest.skip("this machine has no link-local IPv6 address")

    async def hello(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(hello, host="::", port=0)
    port = server.sockets[0].getsockname()[1]
    try:
        sockaddr = socket.getaddrinfo(literal, port, type=socket.SOCK_STREAM)[0][4]
        assert "%" not in sockaddr[0] and sockaddr[3] != 0  # the zone comes as the scope id
        address = address_of(sockaddr)
        assert address.version == 6 and str(address).endswith(f"%{sockaddr[3]}")
        assert address_problem(address) == "a link-local address (cloud metadata services live there)"
        connection = await first_to_connect([str(address)], port, None)
        try:
            assert await connection.read(16) == b"hello"
        finally:
            connection.transport.close()
        with pytest.raises(OSError):  # the address without its zone is no address to connect to
            await first_to_connect([str(address).split("%")[0]], port, None)
    finally:
        server.close()
        await server.wait_closed()


async def test_a_url_writes_an_ipv6_zone_percent_encoded_and_prism_reads_it_so() -> None:
    """RFC 6874: in a URL the zone's "%" is "%25" (`[fe80::1%25eth0]`); httpx2 and urlsplit keep it encoded."""
    assert [str(a) for a in await resolve("fe80::1%25eth0", 443)] == ["fe80::1%eth0"]
    assert [str(a) for a in await resolve("[fe80::1%25eth0]", 443)] == ["fe80::1%eth0"]
    assert [str(a) for a in await resolve("fe80::1%eth0", 443)] == ["fe80::1%eth0"]  # already decoded (aiohttp's)
    literal = link_local_address()
    if literal is None:
        pytest.skip("this machine has no link-local IPv6 address")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, host="::", port=0)
    port = server.sockets[0].getsockname()[1]
    address, zone = literal.split("%")
    url = f"http://[{address}%25{zone}]:{port}/"
    try:
        for allowed in (True, False):
            transport = guarded_transport(allow_private_networks=allowed, ssl_context=ssl_context(None))
            async with httpx2.AsyncClient(transport=transport, timeout=10, trust_env=False) as http:
                if allowed:
                    assert (await http.get(url)).text == "hello"
                else:
                    with pytest.raises(httpx2.ConnectError, match="link-local"):
                        await http.get(url)
    finally:
        server.close()
        await server.wait_closed()


async def test_an_answer_is_asked_for_uncompressed_and_a_compressed_one_is_not_inflated() -> None:
    """httpx2 would inflate a gzip answer after the transport counted its wire bytes: 20 kB of gzip past a 100 kB
    limit as 20 MB. The transport asks for `identity` whatever the client asked, and refuses an answer compressed
    anyway before reading it."""
    bomb = gzip.compress(b'{"a":"' + b"x" * 20_000_000 + b'"}')
    heard: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(bomb) + bomb)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = guarded_transport(allow_private_networks=True, ssl_context=ssl_context(None),
                                  max_answer_bytes=100_000)
    try:
        async with httpx2.AsyncClient(transport=transport, trust_env=False, timeout=10) as http:
            with pytest.raises(httpx2.StreamError, match=r"compressed \(Content-Encoding: gzip\)"):
                await http.post(f"http://127.0.0.1:{port}/mcp", content=b"{}",
                                headers={"Accept-Encoding": "gzip, deflate, br"})
    finally:
        server.close()
        await server.wait_closed()
    sent = heard[0].lower().split(b"\r\n")
    assert [line for line in sent if line.startswith(b"accept-encoding")] == [b"accept-encoding: identity"]
