"""What the SSRF guard tells a customer whose receiver it refuses: a name is "not a public address", never where
it points (an internal name's address is the network's map, learnt one save at a time otherwise); an address the
URL wrote is named with its kind. Deprecated site-local IPv6 (fec0::/10), which Python counts as global, is
refused like the private ranges."""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest

from prism.kit.outbound import address_problem
from tests.factories import Factory
from tests.webhooks_fixtures import BASE


@pytest.mark.parametrize("url", ["https://[fec0::1]/hook", "https://[fefe:1::2]/hook"])
async def test_a_site_local_ipv6_receiver_is_refused(client: httpx.AsyncClient, factory: Factory, url: str) -> None:
    ws = await factory.workspace(roles=("owner",))
    refused = await client.post(BASE, json={"name": "site-local", "url": url}, headers=ws.headers())
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
    assert "a site-local address" in refused.json()["message"]


def test_site_local_is_a_problem_and_a_public_ipv6_address_is_not() -> None:
    assert address_problem(ipaddress.ip_address("fec0::1")) == "a site-local address"
    assert address_problem(ipaddress.ip_address("2001:4860:4860::8888")) is None


@pytest.mark.parametrize("host", ["localhost", socket.gethostname()])
async def test_a_refused_name_is_not_told_where_it_points(client: httpx.AsyncClient, factory: Factory,
                                                          host: str) -> None:
    addresses = {info[4][0] for info in socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)}
    ws = await factory.workspace(roles=("owner",))
    refused = await client.post(BASE, json={"name": "internal", "url": f"https://{host}/hook"}, headers=ws.headers())
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_arguments", refused.text
    message = refused.json()["message"]
    assert f"{host} is not a public address" in message
    assert not any(address in message for address in addresses), message
    assert "loopback" not in message and "resolves" not in message


async def test_an_address_written_in_the_url_is_named_with_its_kind(client: httpx.AsyncClient,
                                                                     factory: Factory) -> None:
    ws = await factory.workspace(roles=("owner",))
    refused = await client.post(BASE, json={"name": "loopback", "url": "https://127.0.0.1/hook"},
                                headers=ws.headers())
    assert refused.status_code == 400, refused.text
    assert "127.0.0.1 is a loopback address" in refused.json()["message"]
