/** Typed shapes of Prism's answers (SPEC.md "Resources"). */

export interface Ping { service: string; version: string; status: string }

export interface Identity {
  authenticated: boolean;
  key: { prefix: string; name: string; created_at: string; last_used_at: string | null; scopes: string[] };
  user: { id: string; email: string };
  tenant: { id: string; name: string | null; subdomain: string | null };
  organization?: { id: string; name?: string; role?: string };
}

export interface ToolDescriptor {
  name: string;
  description: string;
  category: string | null;
  parameters: Record<string, unknown>;
}

/** The data of a list operation: Prism's list envelope. */
export interface Page<T = Record<string, unknown>> { items: T[]; page: number; page_size: number; total: number }

/** One page of the catalog: SPEC's `tools` and `count`, beside the same page and total as the list envelope. */
export interface ToolCatalog extends Page<ToolDescriptor> { tools: ToolDescriptor[]; count: number }

/** The canonical response envelope. */
export type PrismResponse<T = unknown> =
  | { success: true; data: T; tool_name: string }
  | { success: false; error: string; message: string; tool_name: string; details?: Record<string, unknown> };

export type IntrospectDimension =
  | "mega_tools" | "apps" | "entities" | "operations" | "schema" | "stats" | "handlers" | "capability_search"
  | "capability_path" | "guide";

export interface IntrospectParams {
  dimension?: IntrospectDimension;
  mega_tool?: string;
  app?: string;
  entity?: string;
  operation?: string;
  query?: string;
  rerank?: boolean;
  from_node?: string;
  to_node?: string;
  topic?: string;
}

export interface WebhookFields {
  description?: string;
  events?: string[];
  filters?: { ai_system_ids?: string[]; risk_levels?: string[]; decision_types?: string[] };
  custom_headers?: Record<string, string>;
  max_retries?: number;
  retry_delay_seconds?: number;
  timeout_seconds?: number;
}

export interface WebhookUpdate extends WebhookFields {
  name?: string;
  url?: string;
  secret?: string;
  is_active?: boolean;
}

export interface Webhook extends WebhookFields {
  id: string;
  name: string;
  url: string;
  events: string[];
  is_active: boolean;
  /** Why Prism switched the webhook off (a 410 Gone, consecutive failures), else null. */
  deactivated_reason: string | null;
  created_at: string;
  updated_at: string;
  /** Returned at creation only. */
  secret?: string;
}

export type DeliveryStatus = "pending" | "retrying" | "success" | "failed";

export interface Delivery {
  id: string;
  webhook_id: string;
  event_type: string;
  event_id: string;
  status: DeliveryStatus;
  response_status_code: number | null;
  response_body?: string | null;
  error_message: string | null;
  attempt_count: number;
  created_at: string;
  delivered_at: string | null;
  next_retry_at: string | null;
  is_test: boolean;
}

/** One page of a webhook list: SPEC's `count` and `results`, beside the same total and items as the envelope. */
export interface ListOf<T> extends Page<T> { count: number; results: T[] }

/** A fetched descriptor; `document` is null while it is unchanged (304 on If-None-Match). */
export interface Descriptor { etag: string | null; document: Record<string, unknown> | null }
