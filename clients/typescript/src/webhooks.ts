/**
 * Verifying a webhook delivery: `X-Governance-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`.
 *
 * v1 is the lower-case hex HMAC-SHA256, keyed with the UTF-8 bytes of the whole `whk_secret_…` string, of
 * `<t>.<body>` where body is the exact bytes received. Verify the raw body before parsing it.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

import { WebhookSignatureError } from "./errors.js";

export const SIGNATURE_HEADER = "X-Governance-Signature";
export const DEFAULT_TOLERANCE_SECONDS = 300;

function bytes(payload: string | Uint8Array): Buffer {
  return typeof payload === "string" ? Buffer.from(payload, "utf8") : Buffer.from(payload);
}

/** The header value Prism would send for `payload` (to test your own receiver). */
export function sign(payload: string | Uint8Array, secret: string, timestamp?: number): string {
  const t = timestamp ?? Math.floor(Date.now() / 1000);
  const mac = createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(Buffer.concat([Buffer.from(`${t}.`, "utf8"), bytes(payload)])).digest("hex");
  return `t=${t},v1=${mac}`;
}

export interface VerifyOptions { toleranceSeconds?: number; now?: number }

/** Throws WebhookSignatureError unless `header` signs `payload` with `secret` within the tolerance. */
export function verifySignature(payload: string | Uint8Array, header: string | null | undefined, secret: string,
                                options: VerifyOptions = {}): void {
  if (!header) throw new WebhookSignatureError(`missing ${SIGNATURE_HEADER} header`);
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const [key, value = ""] = part.trim().split("=", 2) as [string, string?];
    if (key === "t" && /^\d+$/.test(value)) timestamp = Number(value);
    else if (key === "v1" && value) signatures.push(value);
  }
  if (timestamp === null || signatures.length === 0) {
    throw new WebhookSignatureError("malformed signature header: expected t=<unix seconds>,v1=<hex>");
  }
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - timestamp) > tolerance) {
    throw new WebhookSignatureError(`timestamp ${timestamp} is outside the tolerance of ${tolerance} s`);
  }
  const expected = Buffer.from(sign(payload, secret, timestamp).split("v1=")[1] ?? "", "utf8");
  // Constant-time comparison against every candidate (a rotating secret may sign twice).
  const matches = signatures.some((candidate) => {
    const given = Buffer.from(candidate, "utf8");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookSignatureError("signature does not match the payload");
}

/** The verified event envelope. */
export function constructEvent(payload: string | Uint8Array, header: string | null | undefined, secret: string,
                               options: VerifyOptions = {}): Record<string, unknown> {
  verifySignature(payload, header, secret, options);
  const event: unknown = JSON.parse(bytes(payload).toString("utf8"));
  if (typeof event !== "object" || event === null || Array.isArray(event)) {
    throw new WebhookSignatureError("the payload is not a JSON object");
  }
  return event as Record<string, unknown>;
}
