// One session of the official TypeScript MCP client against Prism, printed as JSON for tests/test_mcp_clients.py.
// usage: node ts_client.mjs <sdk|client> <package dir> <url> <api key> <legacy|auto> [revisions]
//   sdk:    @modelcontextprotocol/sdk 1.x (handshake revisions only)
//   client: @modelcontextprotocol/client 2.x (server/discover and 2026-07-28 in `auto`)
//   revisions: the client's own supportedProtocolVersions, comma-separated (2.x only): its `legacy` handshake
//              offers the first 2025-era one, as an older client would
import { pathToFileURL } from "node:url";
import path from "node:path";

const [flavour, dir, url, key, mode, revisions] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(path.join(dir, file)).href);
let Client, Transport;
if (flavour === "sdk") {
  ({ Client } = await load("dist/esm/client/index.js"));
  ({ StreamableHTTPClientTransport: Transport } = await load("dist/esm/client/streamableHttp.js"));
} else {
  ({ Client, StreamableHTTPClientTransport: Transport } = await load("dist/index.mjs"));
}
const options = flavour === "sdk" ? {} : { versionNegotiation: { mode } };
if (revisions) options.supportedProtocolVersions = revisions.split(",");
const client = new Client({ name: "prism-test", version: "1.0.0" }, options);
const transport = new Transport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } } });
await client.connect(transport);
const version = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
const tools = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  tools.push(...page.tools);
  cursor = page.nextCursor;
} while (cursor);
const call = (args) => client.callTool({ name: "prism_entity_crud", arguments: args });
const listed = await call({ app: "spare_parts", entity: "spare_part", operation: "list", arguments: {} });
const refused = await call({ app: "spare_parts", entity: "spare_part", operation: "create",
                             arguments: { sku: "TS", name: "From TypeScript" } });
await client.close();
console.log(JSON.stringify({ version, tools, listed, refused }));
