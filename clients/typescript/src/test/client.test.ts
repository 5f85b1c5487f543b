/**
 * The client against a running Prism (PRISM_URL, PRISM_OWNER_KEY, PRISM_VIEWER_KEY, PRISM_AGENT_KEY,
 * PRISM_OWNER_EMAIL), and
 * its retry and timeout rules against a scripted loopback server. Run: npm test (Prism's test suite runs it
 * through tests/test_openapi_typescript_client.py, which starts Prism and provides the variables).
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";

import {
  constructEvent, PrismApiError, PrismClient, PrismConnectionError, PrismTimeoutError, sign, verifySignature, WebhookSignatureError,
  type Page,
} from "../index.js";

function env(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} must name the running Prism under test`);
  return value;
}

const prism = (key = "PRISM_OWNER_KEY"): PrismClient =>
  new PrismClient({ baseUrl: env("PRISM_URL"), apiKey: env(key), timeoutMs: 10_000 });

describe("against a running Prism", () => {
  it("pings, identifies the caller and lists its tools", async () => {
    const client = prism();
    assert.equal((await client.ping()).version, "v1");
    const me = await client.me();
    assert.equal(me.authenticated, true);
    assert.equal(me.user.email, env("PRISM_OWNER_EMAIL"));
    const catalog = await client.tools({ search: "entity" });
    assert.deepEqual(catalog.tools.map((t) => t.name), ["prism_entity_crud"]);
    const tree = await client.introspect({ dimension: "mega_tools" });
    assert.ok(JSON.stringify(tree).includes("entity_crud"));
  });

  it("dispatches by coordinate, through the door and through the sandbox", async () => {
    const client = prism();
    const sku = `TS-${Date.now()}`;
    const created = await client.dispatch<{ id: string; sku: string }>(
      "entity_crud", "spare_parts", "spare_part", "create", { sku, name: "Gasket", quantity: 2 });
    const page = await client.dispatch<Page<{ id: string }>>(
      "entity_crud", "spare_parts", "spare_part", "list", { search: sku });
    assert.deepEqual(page.items.map((i) => i.id), [created.id]);
    const read = await client.callTool<{ sku: string }>("prism_entity_crud", {
      app: "spare_parts", entity: "spare_part", operation: "read", arguments: { id: created.id } });
    assert.equal(read.sku, sku);
    const whoami = await client.call<{ user: { email: string } }>("prism_whoami");
    assert.equal(whoami.user.email, env("PRISM_OWNER_EMAIL"));
  });

  it("throws errors carrying Prism's code, status and tool name", async () => {
    const viewer = prism("PRISM_VIEWER_KEY");
    await assert.rejects(viewer.dispatch("entity_crud", "spare_parts", "spare_part", "list", { page: 0 }),
      (e: unknown) => e instanceof PrismApiError && e.status === 400 && e.code === "invalid_arguments");
    await assert.rejects(viewer.dispatch("entity_crud", "spare_parts", "spare_part", "create", { sku: "x", name: "x" }),
      (e: unknown) => e instanceof PrismApiError && e.status === 403 && e.code === "permission_denied"
        && e.toolName === "prism_entity_crud");
    await assert.rejects(viewer.call("prism_nothing_here"),
      (e: unknown) => e instanceof PrismApiError && e.status === 404 && e.code === "tool_not_found");
    await assert.rejects(prism().dispatch("entity_crud", "spare_parts", "spare_part", "create",
      { sku: "TS-BIG", name: "x".repeat(1 << 20) }),
      (e: unknown) => e instanceof PrismApiError && e.status === 413 && e.code === "payload_too_large");
    const stranger = new PrismClient({ baseUrl: env("PRISM_URL"), apiKey: "ck_not_a_real_key_at_all" });
    await assert.rejects(stranger.me(),
      (e: unknown) => e instanceof PrismApiError && e.status === 401 && e.code === "invalid_token");
  });

  it("surfaces a call held for oversight as a 202 oversight_required error", async () => {
    const owner = prism();
    const agentKey = env("PRISM_AGENT_KEY");
    const persona = await owner.dispatch<{ id: string }>("config_manage", "governance", "persona", "create", {
      name: "gated-vendors", default: "allow", oversight: ["entity_crud/finance/vendor/create"] });
    const lookup = agentKey.slice(0, agentKey.indexOf("_") + 13);  // the key's displayed prefix
    await owner.dispatch("config_manage", "governance", "persona", "attach", { key: lookup, persona_id: persona.id });
    await assert.rejects(prism("PRISM_AGENT_KEY").dispatch("entity_crud", "finance", "vendor", "create", { name: "Acme" }),
      (e: unknown) => e instanceof PrismApiError && e.status === 202 && e.code === "oversight_required"
        && String(e.details.oversight_request_id).startsWith("ovr_"));
  });

  it("revalidates the descriptor with its ETag", async () => {
    const client = prism();
    const first = await client.descriptor();
    assert.equal(first.document?.openapi, "3.0.3");
    assert.ok(first.etag);
    assert.deepEqual(await client.descriptor(first.etag), { etag: first.etag, document: null });
  });

  it("resends a delivery, and the answers carry the fields the types name", async () => {
    const client = prism();
    const hook = await client.createWebhook({ name: "TS resend", url: "https://127.0.0.1:9/hook" });
    const sent = await client.sendTestEvent(hook.id);
    const again = await client.resendDelivery(hook.id, sent.id);
    assert.notEqual(again.id, sent.id);
    assert.equal(again.event_id, sent.event_id);
    assert.equal(again.webhook_id, hook.id);
    const read = await client.getWebhook(hook.id);
    assert.equal(read.deactivated_reason, null);
    assert.ok(read.updated_at);
    const page = await client.listDeliveries(hook.id, { page_size: 1 });
    assert.deepEqual([page.page, page.page_size, page.total, page.count], [1, 1, 2, 2]);
    assert.deepEqual(page.items, page.results);
    const catalog = await client.tools();
    assert.equal(catalog.total, catalog.count);
    assert.deepEqual(catalog.items, catalog.tools);
  });

  it("iterates over every page of a list to its end", async () => {
    const client = prism();
    const collect = async <T>(items: AsyncIterable<T>): Promise<T[]> => {
      const all: T[] = [];
      for await (const item of items) all.push(item);
      return all;
    };
    const hooks: string[] = [];
    for (let n = 0; n < 5; n++) {
      hooks.push((await client.createWebhook({ name: `TS paged ${n}`, url: "https://127.0.0.1:9/hook" })).id);
    }
    const [first = ""] = hooks;
    const sent: string[] = [];
    for (let n = 0; n < 3; n++) sent.push((await client.sendTestEvent(first)).id);
    const listedHooks = (await collect(client.iterateWebhooks({ name: "TS paged", page_size: 2 }))).map((w) => w.id);
    assert.deepEqual([...listedHooks].sort(), [...hooks].sort());
    const deliveries = await collect(client.iterateDeliveries(first, { page_size: 2 }));
    assert.deepEqual(deliveries.map((d) => d.id).sort(), [...sent].sort());
    const catalog = await client.tools({ page_size: 100 });
    assert.ok(catalog.total > 3, "the catalog spans several pages of 3");
    assert.deepEqual((await collect(client.iterateTools({ page_size: 3 }))).map((t) => t.name),
                     catalog.tools.map((t) => t.name));
    assert.deepEqual(await collect(client.iterateDeliveries(hooks[1] ?? "")), []);
  });

  it("manages a webhook", async () => {
    const client = prism();
    const hook = await client.createWebhook({ name: "TS hook", url: "https://127.0.0.1:9/hook",
                                              events: ["ticket.created"] });
    assert.match(hook.id, /^whk_/);
    assert.match(hook.secret ?? "", /^whk_secret_/);
    const listed = await client.listWebhooks({ name: "TS hook" });
    assert.ok(listed.results.some((w) => w.id === hook.id));
    assert.equal((await client.updateWebhook(hook.id, { is_active: false })).is_active, false);
    assert.equal((await client.listDeliveries(hook.id)).count, 0);
    await client.deleteWebhook(hook.id);
    await assert.rejects(client.getWebhook(hook.id), (e: unknown) => e instanceof PrismApiError && e.status === 404);
  });
});

type Reply = { status: number; body: unknown; headers?: Record<string, string>; delayMs?: number };

async function scripted(replies: Reply[], run: (baseUrl: string, seen: number[]) => Promise<void>): Promise<void> {
  const seen: number[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(Date.now());
    const reply = (replies.length > 1 ? replies.shift() : replies[0]) as Reply;
    req.resume();
    setTimeout(() => {
      res.writeHead(reply.status, { "Content-Type": "application/json", ...reply.headers });
      res.end(JSON.stringify(reply.body));
    }, reply.delayMs ?? 0);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    await run(`http://127.0.0.1:${port}`, seen);
  } finally {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function releasedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const PONG = { service: "prism", version: "v1", status: "ok" };
const LIMITED = { error: "rate_limited", message: "rate limit reached; retry in 1 s" };

describe("retries and timeouts", () => {
  it("retries a 429 after the Retry-After it announced", async () => {
    await scripted([{ status: 429, body: LIMITED, headers: { "Retry-After": "1" } }, { status: 200, body: PONG }],
      async (baseUrl, seen) => {
        const client = new PrismClient({ baseUrl, backoffBaseMs: 0 });
        assert.deepEqual(await client.ping(), PONG);
        assert.equal(seen.length, 2);
        assert.ok((seen[1] as number) - (seen[0] as number) >= 950, "waited the announced second");
      });
  });

  for (const status of [502, 503, 504]) {
    it(`retries a ${status} with backoff`, async () => {
      await scripted([{ status, body: { error: "unavailable", message: "later" } }, { status: 200, body: PONG }],
        async (baseUrl, seen) => {
          assert.deepEqual(await new PrismClient({ baseUrl, backoffBaseMs: 20 }).ping(), PONG);
          assert.equal(seen.length, 2);
        });
    });
  }

  it("stops after maxRetries and keeps the code and Retry-After", async () => {
    await scripted([{ status: 429, body: LIMITED, headers: { "Retry-After": "0" } }], async (baseUrl, seen) => {
      const client = new PrismClient({ baseUrl, maxRetries: 2 });
      await assert.rejects(client.ping(),
        (e: unknown) => e instanceof PrismApiError && e.code === "rate_limited" && e.retryAfter === 0);
      assert.equal(seen.length, 3);
    });
  });

  for (const status of [301, 302, 307, 308]) {
    it(`throws a ${status} from in front of Prism instead of returning the redirect page`, async () => {
      const moved = { Location: "https://prism.example/api/v1/dev/me/" };
      await scripted([{ status, body: { detail: "moved" }, headers: moved }], async (baseUrl, seen) => {
        const client = new PrismClient({ baseUrl, apiKey: "ck_test" });
        const redirected = (e: unknown): boolean => e instanceof PrismApiError && e.status === status
          && e.code === "unexpected_redirect" && e.message.includes(moved.Location);
        await assert.rejects(client.me(), redirected);
        await assert.rejects(client.sendTestEvent("whk_1"), redirected);
        await assert.rejects(client.descriptor(), redirected);
        assert.equal(seen.length, 3);
      });
    });
  }

  it("does not retry other errors", async () => {
    await scripted([{ status: 500, body: { error: "internal_error", message: "boom" } }], async (baseUrl, seen) => {
      await assert.rejects(new PrismClient({ baseUrl }).ping(), (e: unknown) => e instanceof PrismApiError
        && e.status === 500);
      assert.equal(seen.length, 1);
    });
  });

  it("refuses an idempotency key Prism would refuse before sending anything", async () => {
    await scripted([{ status: 200, body: { success: true, data: {} } }], async (baseUrl, seen) => {
      const client = new PrismClient({ baseUrl, backoffBaseMs: 0 });
      for (const key of ["", "clé", "ключ", "tab\tin-key", "k".repeat(256)]) {
        await assert.rejects(client.dispatch("a", "b", "c", "d", {}, { idempotencyKey: key }),
          (e: unknown) => e instanceof TypeError && /printable ASCII/.test(e.message));
      }
      assert.equal(seen.length, 0);
      await client.dispatch("a", "b", "c", "d", {}, { idempotencyKey: `order 42/${"k".repeat(246)}` });
      assert.equal(seen.length, 1);
    });
  });

  it("reports a bad argument as a rejected promise, never as a synchronous throw", async () => {
    await scripted([{ status: 200, body: {} }], async (baseUrl, seen) => {
      const client = new PrismClient({ baseUrl });
      const key = { idempotencyKey: "clé" };
      const started: Array<() => Promise<unknown>> = [
        () => client.call("prism_whoami", {}, key),
        () => client.dispatch("entity_crud", "itsm", "ticket", "create", {}, key),
        () => client.callTool("prism_entity_crud", { app: "itsm", entity: "ticket", operation: "create" }, key),
        () => client.createWebhook({ name: "n", url: "https://127.0.0.1:9/" }, key),
        () => client.updateWebhook("whk_1", { is_active: false }, key),
        () => client.deleteWebhook("whk_1", key),
        () => client.sendTestEvent("whk_1", key),
        () => client.getWebhook("\ud800"),  // a lone surrogate: encodeURIComponent throws URIError
      ];
      for (const start of started) {
        let pending: Promise<unknown> | undefined;
        assert.doesNotThrow(() => { pending = start(); }, `${start} threw instead of rejecting`);
        await assert.rejects(pending as Promise<unknown>, (e: unknown) => e instanceof TypeError || e instanceof URIError);
      }
      assert.equal(seen.length, 0);
    });
  });

  it("throws the caller's mistakes at once, as they are, and retries only what the network broke", async () => {
    let sent = 0;
    const counting: typeof fetch = async (input, init) => { sent += 1; return fetch(input, init); };
    const options = { fetch: counting, backoffBaseMs: 1, maxRetries: 2 };
    const mistake = (pattern: RegExp) => (e: unknown): boolean => e instanceof TypeError && pattern.test(e.message)
      && !(e instanceof PrismConnectionError);
    await assert.rejects(new PrismClient({ baseUrl: "not a url", ...options }).ping(), mistake(/Invalid URL/));
    await assert.rejects(new PrismClient({ baseUrl: "ftp://127.0.0.1", ...options }).ping(), mistake(/http/));
    await scripted([{ status: 200, body: PONG }], async (baseUrl, seen) => {
      await assert.rejects(new PrismClient({ baseUrl, headers: { "X-Note": "a\nb" }, ...options }).ping(),
        mistake(/header value/));
      assert.equal(seen.length, 0);
    });
    assert.equal(sent, 0, "a request that cannot be built is neither sent nor retried");
    // Nothing listens on a port just released: the network refuses, and that is retried.
    await assert.rejects(new PrismClient({ baseUrl: `http://127.0.0.1:${await releasedPort()}`, ...options }).ping(),
      (e: unknown) => e instanceof PrismConnectionError && /ECONNREFUSED/.test(e.message));
    assert.equal(sent, 3);
  });

  it("gives up after timeoutMs", async () => {
    await scripted([{ status: 200, body: PONG, delayMs: 1500 }], async (baseUrl) => {
      const started = Date.now();
      await assert.rejects(new PrismClient({ baseUrl, timeoutMs: 300 }).ping(), PrismTimeoutError);
      assert.ok(Date.now() - started < 1400);
    });
  });
});

describe("webhook verifier", () => {
  const secret = `whk_secret_${"a".repeat(40)}`;
  const body = JSON.stringify({ data: {}, event_id: "dec_1", event_type: "governance.decision.allow" });

  it("accepts Prism's signature scheme", () => {
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
    verifySignature(body, `t=${t},v1=${v1}`, secret);
    assert.equal(sign(body, secret, t), `t=${t},v1=${v1}`);
    assert.equal(constructEvent(Buffer.from(body), `t=${t},v1=${v1}`, secret).event_id, "dec_1");
  });

  it("rejects tampering, a wrong secret, stale timestamps and malformed headers", () => {
    const header = sign(body, secret);
    assert.throws(() => verifySignature(`${body} `, header, secret), WebhookSignatureError);
    assert.throws(() => verifySignature(body, header, `${secret}x`), WebhookSignatureError);
    const stale = Math.floor(Date.now() / 1000) - 301;
    assert.throws(() => verifySignature(body, sign(body, secret, stale), secret), /tolerance/);
    verifySignature(body, sign(body, secret, stale), secret, { toleranceSeconds: 600 });
    for (const bad of [undefined, "", "t=abc,v1=00", "v1=deadbeef", "t=1"]) {
      assert.throws(() => verifySignature(body, bad, secret), WebhookSignatureError);
    }
  });
});
