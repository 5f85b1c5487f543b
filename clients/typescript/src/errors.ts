/** Errors thrown by the client; every API refusal carries Prism's machine code. */

export class PrismError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Prism answered with an error status, or the envelope said `success: false`. */
export class PrismApiError extends PrismError {
  readonly status: number;
  readonly code: string;
  readonly toolName: string | null;
  readonly details: Record<string, unknown>;
  /** Seconds Prism asked to wait (Retry-After), when it said. */
  readonly retryAfter: number | null;
  readonly body: unknown;

  constructor(status: number, code: string, message: string, options: {
    toolName?: string | null; details?: Record<string, unknown>; retryAfter?: number | null; body?: unknown;
  } = {}) {
    super(`${status} ${code}: ${message}`);
    this.status = status;
    this.code = code;
    this.toolName = options.toolName ?? null;
    this.details = options.details ?? {};
    this.retryAfter = options.retryAfter ?? null;
    this.body = options.body;
  }
}

/** No answer within `timeoutMs`. */
export class PrismTimeoutError extends PrismError {}

/** Prism could not be reached. */
export class PrismConnectionError extends PrismError {}

/** A webhook delivery whose X-Governance-Signature does not verify. */
export class WebhookSignatureError extends PrismError {}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The error for an answer, whatever its shape (envelope, sandbox, OAuth, or not JSON at all). */
export function errorFor(status: number, body: unknown, retryAfter: number | null): PrismApiError {
  const payload = isRecord(body) ? body : {};
  const code = typeof payload.error === "string" ? payload.error : `http_${status}`;
  const text = payload.message ?? payload.error_description ?? (typeof body === "string" && body ? body : null);
  const message = typeof text === "string" ? text : `HTTP ${status}`;
  return new PrismApiError(status, code, message, {
    toolName: typeof payload.tool_name === "string" ? payload.tool_name : null,
    details: isRecord(payload.details) ? payload.details : {},
    retryAfter,
    body,
  });
}
