/**
 * The official TypeScript client of Prism (Node.js 18+, no runtime dependencies).
 *
 *   const prism = new PrismClient({ baseUrl: "https://acme.prism.example", apiKey: "ck_..." });
 *   const page = await prism.dispatch("entity_crud", "finance", "invoice", "list", { status: "approved" });
 *
 * A 429 is retried, and a 502, 503, 504 or broken connection only when sending the call again cannot run it
 * twice: a read, or a call carrying an idempotency key (see `send`). Up to `maxRetries` retries, waiting
 * Retry-After when Prism sends it, else exponential backoff with full jitter. `timeoutMs` bounds each attempt.
 * Every method that calls Prism is async: whatever fails, a bad argument included, rejects its promise.
 */
import { randomUUID } from "node:crypto";

import { errorFor, PrismApiError, PrismConnectionError, PrismTimeoutError } from "./errors.js";
import type {
  Delivery, Descriptor, Identity, IntrospectParams, ListOf, Page, Ping, PrismResponse, ToolCatalog,
  ToolDescriptor, Webhook, WebhookFields, WebhookUpdate,
} from "./types.js";

export * from "./errors.js";
export type * from "./types.js";
export { constructEvent, sign, SIGNATURE_HEADER, verifySignature } from "./webhooks.js";

export const VERSION = "0.4.0";
/** Retried only for a call that cannot run twice: a gateway may answer them after Prism ran the call. */
export const GATEWAY_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);
/** Prism's 409 for a repeat of a keyed call that is still finishing: sent again, it gets that call's answer. */
const KEY_IN_PROGRESS = "idempotency_key_in_progress";
/** Prism's rule for a key (docs/idempotency.md): 1 to 255 printable ASCII characters. */
const USABLE_KEY = /^[\x20-\x7e]{1,255}$/;
const WEBHOOKS = "/api/v1/risk-assessment/governance/webhooks/";
/** The largest page Prism's lists answer: the fewest requests for an iteration. */
const PAGE_SIZE_MAX = 100;

export interface PrismClientOptions {
  baseUrl: string;
  /** A Prism API key (ck_/mcp_) or an OAuth access token. */
  apiKey?: string;
  /** Per attempt, in milliseconds (default 30 000). */
  timeoutMs?: number;
  /** Retries of 429, and of 502/503/504 and broken connections for calls that cannot run twice (default 3). */
  maxRetries?: number;
  /** Backoff without Retry-After: random(0, backoffBaseMs * 2^attempt), at most backoffMaxMs. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** The longest Retry-After waited for (default 120 000); a longer one is thrown at once, with `retryAfter`. */
  maxRetryAfterMs?: number;
  headers?: Record<string, string>;
  /** Another fetch implementation (defaults to the global one). */
  fetch?: typeof fetch;
}

/**
 * Per call that changes something (`dispatch`, `callTool`, `call`, and the webhooks' create, update, delete,
 * test event and resend). `idempotencyKey`: the key sent on every attempt of the call, so that Prism runs it once however
 * often it is sent; by default a random UUID4 per call, `false` for none (then a 502/503/504 or a broken
 * connection is thrown at once, since Prism may have run the call).
 */
export interface IdempotencyOptions {
  idempotencyKey?: string | false;
}

interface Request {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | undefined | null>;
  body?: unknown;
  headers?: Record<string, string>;
  idempotencyKey?: string;
}

interface Answer { status: number; headers: Headers; body: unknown }

const seg = (value: string): string => encodeURIComponent(value);
const keyInProgress = (answer: Answer): boolean => answer.status === 409 && typeof answer.body === "object"
  && answer.body !== null && (answer.body as { error?: unknown }).error === KEY_IN_PROGRESS;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The error an answer means, or null when it is one the call expects. Prism's API never redirects: a 3xx comes
 * from something in front of it (http:// behind TLS, another host) and its body is not the answer asked for;
 * returned, it would pass a redirect page off as the result (a delete that deleted nothing).
 */
function errorOf(answer: Answer, okStatuses: readonly number[] = []): PrismApiError | null {
  if (okStatuses.includes(answer.status)) return null;
  if (answer.status >= 300 && answer.status < 400) {
    const location = answer.headers.get("location") ?? "(no Location)";
    return new PrismApiError(answer.status, "unexpected_redirect",
                             `redirected to ${location}; Prism does not redirect its API: check the base URL`,
                             { body: answer.body });
  }
  if (answer.status >= 400) {
    return errorFor(answer.status, answer.body, retryAfterSeconds(answer.headers.get("retry-after")));
  }
  return null;
}

/** What broke, from fetch's rejection: undici's message is "fetch failed", its cause says why (ECONNREFUSED...). */
function networkFailure(error: unknown): string {
  const cause = (error as { cause?: { message?: string; code?: string } }).cause;
  const why = cause?.message || cause?.code;
  return why ? `${(error as Error).message}: ${why}` : String((error as Error).message ?? error);
}

/** Retry-After in seconds: delta-seconds or an HTTP date. */
export function retryAfterSeconds(value: string | null): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const when = Date.parse(trimmed);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}

export class PrismClient {
  readonly baseUrl: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  private readonly options: PrismClientOptions;
  private readonly fetchImpl: typeof fetch;

  constructor(options: PrismClientOptions) {
    this.options = options;
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = options.maxRetries ?? 3;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
  }

  /**
   * Wait before retry number `attempt` (0-based), or null when Prism asks for a longer wait than
   * maxRetryAfterMs: sleeping past the caller's cap would hold it longer than it allowed, and retrying sooner
   * than asked only earns another refusal, so the caller gets the answer (and its `retryAfter`) at once.
   */
  retryDelayMs(attempt: number, retryAfter: number | null): number | null {
    if (retryAfter === null) return this.backoffMs(attempt);
    return retryAfter * 1000 <= (this.options.maxRetryAfterMs ?? 120_000) ? retryAfter * 1000 : null;
  }

  /** Exponential backoff with full jitter: random(0, backoffBaseMs * 2^attempt), at most backoffMaxMs. */
  backoffMs(attempt: number): number {
    const ceiling = Math.min(this.options.backoffMaxMs ?? 30_000, (this.options.backoffBaseMs ?? 500) * 2 ** attempt);
    return Math.random() * ceiling;
  }

  private url(request: Request): string {
    const url = new URL(this.baseUrl + request.path);
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`baseUrl must be an http:// or https:// URL, not ${JSON.stringify(this.baseUrl)}`);
    }
    for (const [name, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  /**
   * The request as fetch sends it, built before anything is sent: a base URL that is not http(s), a header value
   * fetch cannot send or a body JSON cannot hold is the caller's mistake, thrown as it is (a TypeError) and never
   * retried. Fetch rejects a well-formed request only when the network fails.
   */
  private outgoing(request: Request, signal: AbortSignal): globalThis.Request {
    const headers: Record<string, string> = {
      Accept: "application/json", "User-Agent": `prism-client-typescript/${VERSION}`,
      ...(this.options.apiKey ? { Authorization: `Bearer ${this.options.apiKey}` } : {}),
      ...(request.body !== undefined ? { "Content-Type": "application/json" } : {}),
      ...this.options.headers, ...request.headers,
      ...(request.idempotencyKey !== undefined ? { "Idempotency-Key": request.idempotencyKey } : {}),
    };
    return new globalThis.Request(this.url(request), {
      method: request.method, headers, redirect: "manual", signal,
      body: request.body !== undefined ? JSON.stringify(request.body) : undefined,
    });
  }

  private async attempt(request: Request): Promise<Answer> {
    const controller = new AbortController();
    const outgoing = this.outgoing(request, controller.signal);
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const response = await this.fetchImpl(outgoing);
      const text = await response.text();
      let body: unknown = text || null;
      if (text && (response.headers.get("content-type") ?? "").includes("json")) {
        try { body = JSON.parse(text); } catch { body = text; }
      }
      return { status: response.status, headers: response.headers, body };
    } catch (error) {
      if (controller.signal.aborted) {
        throw new PrismTimeoutError(`${request.method} ${request.path}: no answer within ${this.timeoutMs} ms`);
      }
      throw new PrismConnectionError(`${request.method} ${request.path}: ${networkFailure(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Send with the retry policy; the last answer (an error status included) is returned. A 502/503/504 or a
   * broken connection may come after Prism ran the call (a gateway timing out, a connection cut on the way
   * back): it is sent again only when that cannot run it twice.
   */
  async send(request: Request): Promise<Answer> {
    const repeatable = IDEMPOTENT_METHODS.has(request.method) || request.idempotencyKey !== undefined;
    for (let attempt = 0; ; attempt++) {
      let answer: Answer;
      try {
        answer = await this.attempt(request);
      } catch (error) {
        if (!(error instanceof PrismConnectionError)) throw error;
        if (!repeatable) {
          throw new PrismConnectionError(`${error.message} (not sent again: it carries no idempotency key, `
                                         + "so Prism may have run it)");
        }
        if (attempt >= this.maxRetries) throw error;
        await sleep(this.backoffMs(attempt));
        continue;
      }
      const transient = answer.status === 429
        || (repeatable && (GATEWAY_STATUSES.has(answer.status) || keyInProgress(answer)));
      if (!transient || attempt >= this.maxRetries) return answer;
      const wait = this.retryDelayMs(attempt, retryAfterSeconds(answer.headers.get("retry-after")));
      if (wait === null) return answer;
      await sleep(wait);
    }
  }

  /**
   * A call that changes something carries its idempotency key (drawn once, so every retry sends it). A DELETE is
   * repeatable without one, but its repeat would answer 404 for what the first attempt deleted; with the key it
   * gets the first attempt's answer.
   */
  private keyed(request: Request, options: IdempotencyOptions): Request {
    const key = options.idempotencyKey ?? randomUUID();
    if (key === false) return request;
    // Checked here: fetch cannot send a header beyond Latin-1 (it would surface as a connection error, retried),
    // and Prism refuses any other key outside its rule.
    if (!USABLE_KEY.test(key)) {
      throw new TypeError(`an idempotency key is 1 to 255 printable ASCII characters, not ${JSON.stringify(key)}; `
                          + "pass false to send none");
    }
    return { ...request, idempotencyKey: key };
  }

  private async json<T>(request: Request, okStatuses: readonly number[] = []): Promise<T> {
    const answer = await this.send(request);
    const error = errorOf(answer, okStatuses);
    if (error) throw error;
    return answer.body as T;
  }

  private async envelope<T>(request: Request): Promise<T> {
    const answer = await this.send(request);
    const error = errorOf(answer);
    if (error) throw error;
    const body = answer.body as PrismResponse<T> | null;
    if (body === null || typeof body !== "object" || !("success" in body)) {
      throw new PrismApiError(answer.status, "unexpected_response", "the answer is not a PrismResponse envelope",
                              { body });
    }
    // 202 when a governance rule holds the call for review (code oversight_required).
    if (body.success !== true) throw errorFor(answer.status, body, null);
    return body.data;
  }

  // --- sandbox ---------------------------------------------------------------------------------------

  async ping(): Promise<Ping> { return this.json({ method: "GET", path: "/api/v1/dev/ping/" }); }

  async me(): Promise<Identity> { return this.json({ method: "GET", path: "/api/v1/dev/me/" }); }

  async tools(filter: { category?: string; search?: string; page?: number; page_size?: number } = {}):
      Promise<ToolCatalog> {
    return this.json({ method: "GET", path: "/api/v1/dev/tools/", query: filter });
  }

  /** GET, not POST with the same parameters: a read, so a gateway's 502/504 can be retried. */
  async introspect<T = Record<string, unknown>>(params: IntrospectParams = {}): Promise<T> {
    return this.json({ method: "GET", path: "/api/v1/dev/introspect/", query: { ...params } });
  }

  /** POST /api/v1/dev/call/: the bare tool result. */
  async call<T = unknown>(name: string, args: Record<string, unknown> = {}, options: IdempotencyOptions = {}):
      Promise<T> {
    return this.json(this.keyed({ method: "POST", path: "/api/v1/dev/call/", body: { name, arguments: args } },
                                options));
  }

  // --- canonical dispatch ----------------------------------------------------------------------------

  /** POST /prism/{megaTool}/{app}/{entity}/{operation}: the envelope's `data`. */
  async dispatch<T = unknown>(megaTool: string, app: string, entity: string, operation: string,
                        args: Record<string, unknown> = {}, options: { missionId?: string } & IdempotencyOptions = {}):
      Promise<T> {
    return this.envelope(this.keyed({
      method: "POST", path: `/prism/${seg(megaTool)}/${seg(app)}/${seg(entity)}/${seg(operation)}`, body: args,
      headers: options.missionId ? { "X-Prism-Mission": options.missionId } : {},
    }, options));
  }

  /** POST /api/mcp/tools/<toolName>/ with the envelope {app, entity, operation, arguments}. */
  async callTool<T = unknown>(toolName: string, envelope: {
    app: string; entity: string; operation: string; arguments?: Record<string, unknown>;
  }, options: IdempotencyOptions = {}): Promise<T> {
    return this.envelope(this.keyed({ method: "POST", path: `/api/mcp/tools/${seg(toolName)}/`,
                                 body: { arguments: {}, ...envelope } }, options));
  }

  /** The host's OpenAPI descriptor; with `etag`, `document` is null while it is unchanged. */
  async descriptor(etag?: string): Promise<Descriptor> {
    const answer = await this.send({ method: "GET", path: "/.well-known/openapi.json",
                                     headers: etag ? { "If-None-Match": etag } : {} });
    const error = errorOf(answer, [304]);
    if (error) throw error;
    return { etag: answer.headers.get("etag"),
             document: answer.status === 304 ? null : answer.body as Record<string, unknown> };
  }

  // --- webhooks --------------------------------------------------------------------------------------

  async createWebhook(webhook: { name: string; url: string } & WebhookFields, options: IdempotencyOptions = {}):
      Promise<Webhook> {
    return this.json(this.keyed({ method: "POST", path: WEBHOOKS, body: webhook }, options));
  }

  async listWebhooks(query: { page?: number; page_size?: number; is_active?: boolean; name?: string } = {}):
      Promise<ListOf<Webhook>> {
    return this.json({ method: "GET", path: WEBHOOKS, query });
  }

  async getWebhook(id: string): Promise<Webhook> {
    return this.json({ method: "GET", path: `${WEBHOOKS}${seg(id)}/` });
  }

  async updateWebhook(id: string, changes: WebhookUpdate, options: IdempotencyOptions = {}): Promise<Webhook> {
    return this.json(this.keyed({ method: "PATCH", path: `${WEBHOOKS}${seg(id)}/`, body: changes }, options));
  }

  async deleteWebhook(id: string, options: IdempotencyOptions = {}): Promise<void> {
    await this.json(this.keyed({ method: "DELETE", path: `${WEBHOOKS}${seg(id)}/` }, options));
  }

  async listDeliveries(id: string, query: { page?: number; page_size?: number; status?: string; event_type?: string } = {}):
      Promise<ListOf<Delivery>> {
    return this.json({ method: "GET", path: `${WEBHOOKS}${seg(id)}/deliveries/`, query });
  }

  async getDelivery(id: string, deliveryId: string): Promise<Delivery> {
    return this.json({ method: "GET", path: `${WEBHOOKS}${seg(id)}/deliveries/${seg(deliveryId)}/` });
  }

  async sendTestEvent(id: string, options: IdempotencyOptions = {}): Promise<Delivery> {
    return this.json(this.keyed({ method: "POST", path: `${WEBHOOKS}${seg(id)}/test/` }, options));
  }

  // --- every page of a list ---------------------------------------------------------------------------

  /** Every tool of the catalog, page after page: `for await (const tool of prism.iterateTools())`. */
  async *iterateTools(filter: { category?: string; search?: string; page_size?: number } = {}):
      AsyncGenerator<ToolDescriptor> {
    yield* this.every((page) => this.tools({ page_size: PAGE_SIZE_MAX, ...filter, page }));
  }

  /** Every webhook, newest first, page after page. */
  async *iterateWebhooks(query: { page_size?: number; is_active?: boolean; name?: string } = {}):
      AsyncGenerator<Webhook> {
    yield* this.every((page) => this.listWebhooks({ page_size: PAGE_SIZE_MAX, ...query, page }));
  }

  /** Every delivery of a webhook, newest first, page after page. */
  async *iterateDeliveries(id: string, query: { page_size?: number; status?: string; event_type?: string } = {}):
      AsyncGenerator<Delivery> {
    yield* this.every((page) => this.listDeliveries(id, { page_size: PAGE_SIZE_MAX, ...query, page }));
  }

  /** Prism's lists page by offset (`page`, `page_size`) and say how many items there are in all (`total`). */
  private async *every<T>(listPage: (page: number) => Promise<Page<T>>): AsyncGenerator<T> {
    for (let page = 1; ; page++) {
      const listed = await listPage(page);
      yield* listed.items;
      if (listed.items.length === 0 || listed.page * listed.page_size >= listed.total) return;
    }
  }

  /** A new delivery of the delivery's event (same bytes, fresh signature and id); the original stays. */
  async resendDelivery(id: string, deliveryId: string, options: IdempotencyOptions = {}): Promise<Delivery> {
    return this.json(this.keyed({
      method: "POST", path: `${WEBHOOKS}${seg(id)}/deliveries/${seg(deliveryId)}/resend/` }, options));
  }
}
