#!/usr/bin/env node
// Drives a running baton server through LibreChat's real client tools from
// `@librechat/agents` (see package.json for the pinned version):
//   - createProgrammaticToolCallingTool  -> run_tools_with_code  (/exec/programmatic, /exec)
//   - createCodeExecutionTool            -> execute_code         (/exec)
//
// The tools are invoked exactly the way the package's ToolNode invokes them
// (dist/esm/tools/ToolNode.mjs: lines 709-731 build the tool call,
// invokeWithRuntime at lines 602-621 calls `tool.invoke(invokeParams, runtime)`),
// and a tool error is turned into the string the model sees the way ToolNode's
// catch block does (ToolNode.mjs line 834: `Error: ${e.message}\n Please fix your mistakes.`).
//
// Environment:
//   BATON_URL   base URL of the server, e.g. http://127.0.0.1:41234 (a trailing /v1 is fine)
//   LC_JWT_PRIVATE_KEY_FILE, LC_JWT_KID  the key LibreChat signs its Code API
//               tokens with: the client's `authHeaders` then carries
//               `Authorization: Bearer <JWT>` minted as LibreChat >= 0.8.6 mints it
//               (librechat.mjs), the way LibreChat's app wires the package
//   BATON_KEY   API key, for the older modes of BATON_AUTH
//   BATON_AUTH  optional: `jwt` (the default with LC_JWT_PRIVATE_KEY_FILE), `x-api-key`
//               (the default without: LibreChat before 0.8.6), `bearer`
//               (Authorization: Bearer KEY), `apikey` (Authorization: ApiKey KEY), or `none`
//   BATON_PROFILE  optional execution profile (`default`, `stateful`, or `none`);
//               default `default`, which adds `X-CodeAPI-Expected-Profile: default`
//               the way LibreChat's app does for its default code environment
//   BATON_TRACE=1  print every HTTP exchange (request headers and body, response
//               status and body) as one JSON line each on stderr
//   BATON_DIRECT=1 let the client talk to BATON_URL directly instead of through the
//               in-process recording proxy (the `cancel` scenario then only checks
//               what the tool returned, not that the cancel request was sent)
//   BATON_ONLY  optional comma-separated list of scenario names to run
//
// Output: one JSON line per scenario on stdout:
//   {"scenario", "ok", "output" (what the tool returned to the agent), "error", ...}
// Exit status: 0 when every scenario passed, 1 otherwise, 2 on a usage error.

import http from 'node:http';
import fs from 'node:fs';
import { CodeApiAuth } from './librechat.mjs';
import { invokeLikeToolNode as invokeShared } from './toolnode.mjs';

const BATON_URL = process.env.BATON_URL;
const BATON_KEY = process.env.BATON_KEY ?? '';
if (!BATON_URL) {
  console.error('run.mjs: set BATON_URL (e.g. http://127.0.0.1:41234) and BATON_KEY');
  process.exit(2);
}
// stdout carries only the scenario lines: the package logs through console.log
// (PTC debug) and console.debug (logCodeApiDiagnostic, tools/diagnostics.mjs:19-21).
const emit = (obj) => process.stdout.write(`${JSON.stringify(obj)}\n`);
for (const level of ['log', 'info', 'debug']) console[level] = (...a) => console.error(...a);

const TRACE = process.env.BATON_TRACE === '1';
const DIRECT = process.env.BATON_DIRECT === '1';
const ONLY = process.env.BATON_ONLY ? new Set(process.env.BATON_ONLY.split(',').map((s) => s.trim())) : null;
const SCENARIO_DEADLINE_MS = 60_000;

// ---------------------------------------------------------------------------
// Recording reverse proxy: transparent, loopback only. It forwards each request
// to BATON_URL unchanged (bar Host) and remembers what went over the wire, so
// the harness can check what the real client sent (e.g. that a cancel was
// posted with the id of the request in flight).
// ---------------------------------------------------------------------------
const exchanges = [];

function startRecordingProxy(target) {
  const upstreamBase = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const record = {
        at: new Date().toISOString(),
        method: req.method,
        path: req.url,
        headers: { ...req.headers },
        body: parseMaybeJson(body.toString('utf8')),
      };
      exchanges.push(record);
      // Path of the proxy URL is "/<same path the client asked for>"; the base
      // path of BATON_URL is already part of it because the client got
      // `http://127.0.0.1:<proxy port><base path>` as its base URL.
      const headers = { ...req.headers, host: upstreamBase.host };
      delete headers['content-length'];
      if (body.length > 0) headers['content-length'] = String(body.length);
      const upstream = http.request(
        {
          protocol: upstreamBase.protocol,
          hostname: upstreamBase.hostname,
          port: upstreamBase.port,
          method: req.method,
          path: req.url,
          headers,
        },
        (up) => {
          const out = [];
          up.on('data', (c) => out.push(c));
          up.on('end', () => {
            const text = Buffer.concat(out).toString('utf8');
            record.response = { status: up.statusCode, body: parseMaybeJson(text) };
            if (TRACE) console.error(JSON.stringify({ trace: record }));
            if (res.destroyed) return;
            const h = { ...up.headers };
            delete h['transfer-encoding'];
            h['content-length'] = String(Buffer.byteLength(text));
            res.writeHead(up.statusCode ?? 502, h);
            res.end(text);
          });
        },
      );
      upstream.on('error', (err) => {
        record.response = { error: String(err && err.message) };
        if (TRACE) console.error(JSON.stringify({ trace: record }));
        if (!res.headersSent && !res.destroyed) {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: 'error', error: `recording proxy: ${err.message}` }));
        }
      });
      // The client aborted (cancel scenario): drop the upstream request too, so
      // the server sees the same disconnect it would see without the proxy.
      res.on('close', () => {
        if (!res.writableFinished) {
          record.client_aborted = true;
          upstream.destroy();
        }
      });
      upstream.end(body);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

function parseMaybeJson(text) {
  if (text === '') return '';
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

// ---------------------------------------------------------------------------
// Client configuration, the way LibreChat configures it.
// ---------------------------------------------------------------------------
let proxyServer;
let clientBase = BATON_URL.replace(/\/+$/, '');
if (!DIRECT) {
  proxyServer = await startRecordingProxy(BATON_URL);
  const u = new URL(BATON_URL);
  const basePath = u.pathname.replace(/\/+$/, '');
  clientBase = `http://127.0.0.1:${proxyServer.address().port}${basePath}`;
}
// The package reads the base URL from LIBRECHAT_CODE_BASEURL when no `baseUrl`
// option is given (dist/esm/tools/CodeExecutor.mjs line 14, evaluated when a
// tool is created: ProgrammaticToolCalling.mjs line 489, CodeExecutor.mjs line 275).
// LibreChat's app passes the same value as `baseUrl`; we go through the env var.
process.env.LIBRECHAT_CODE_BASEURL = clientBase;
// The package routes every request through `PROXY` when it is set
// (dist/esm/utils/proxy.mjs lines 27-31); a loopback server must not be proxied.
delete process.env.PROXY;

const {
  createProgrammaticToolCallingTool,
  createCodeExecutionTool,
  getCodeBaseURL,
} = await import('@librechat/agents');
const { tool } = await import('@librechat/agents/langchain/tools');

const jwtKeyFile = process.env.LC_JWT_PRIVATE_KEY_FILE;
const lcAuth = jwtKeyFile
  ? new CodeApiAuth({ privateKeyPem: fs.readFileSync(jwtKeyFile, 'utf8'), kid: process.env.LC_JWT_KID })
  : null;
const harnessUser = { id: '6650c1e1f1a2b3c4d5e6f7a8', tenantId: 'acme' };
function authHeaders() {
  switch ((process.env.BATON_AUTH ?? (lcAuth ? 'jwt' : 'x-api-key')).toLowerCase()) {
    case 'jwt':
      return lcAuth.headers(harnessUser);
    case 'none':
      return {};
    case 'bearer':
      return { Authorization: `Bearer ${BATON_KEY}` };
    case 'apikey':
      return { Authorization: `ApiKey ${BATON_KEY}` };
    default:
      return { 'X-API-Key': BATON_KEY };
  }
}
const profileEnv = process.env.BATON_PROFILE ?? 'default';
const executionProfile = profileEnv === 'none' || profileEnv === '' ? undefined : profileEnv;
const clientParams = {
  // LibreChat's app passes an async function here (packages/api: `authHeaders: () =>
  // codeExecutionAuthHeaders(...)`); the package awaits it before every request
  // (dist/esm/tools/CodeExecutor.mjs lines 155-164).
  authHeaders: async () => authHeaders(),
  ...(executionProfile != null ? { executionProfile } : {}),
};

// ---------------------------------------------------------------------------
// The agent's own tools: real LangChain tools built with the same
// @langchain/core the package uses, plus the LCTool definitions the ToolNode
// hands the programmatic tool (`allowed_callers: ['code_execution']` is what
// makes a tool callable from code: dist/esm/tools/CallerCapabilities.mjs 36-59).
// ---------------------------------------------------------------------------
const toolCallsSeen = [];
const TEMPS = { Paris: 15, Tokyo: 22 };

function defineTool(name, description, parameters, fn) {
  const impl = tool(
    async (input) => {
      toolCallsSeen.push({ name, input });
      return fn(input);
    },
    { name, description, schema: parameters },
  );
  const def = { name, description, parameters, allowed_callers: ['code_execution'] };
  return { impl, def };
}

const agentTools = [
  defineTool(
    'get_weather',
    'Current weather for a city.',
    {
      type: 'object',
      properties: { city: { type: 'string', description: 'City name' } },
      required: ['city'],
    },
    async ({ city }) => ({ city, temp: TEMPS[city] ?? 0 }),
  ),
  defineTool(
    'flaky_lookup',
    'A lookup that always fails.',
    { type: 'object', properties: {} },
    async () => {
      throw new Error('upstream service exploded');
    },
  ),
  defineTool(
    'get-stock-price',
    'Latest price for a ticker symbol.',
    {
      type: 'object',
      properties: { symbol: { type: 'string' } },
      required: ['symbol'],
    },
    async ({ symbol }) => ({ symbol, price: 42.5 }),
  ),
];
const toolMap = new Map(agentTools.map((t) => [t.def.name, t.impl]));
const toolDefs = agentTools.map((t) => t.def);

// ---------------------------------------------------------------------------
// Invoke a tool the way ToolNode does.
// ---------------------------------------------------------------------------
function invokeLikeToolNode(lcTool, args, { signal, programmatic }) {
  return invokeShared(lcTool, args, { signal, programmatic, toolMap, toolDefs });
}

function exchangesSince(mark) {
  return exchanges.slice(mark).map((x) => ({
    method: x.method,
    path: x.path,
    request_id: x.headers['x-librechat-code-request-id'],
    status: x.client_aborted ? 'client aborted' : (x.response?.status ?? x.response?.error ?? 'pending'),
  }));
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------
const ptc = createProgrammaticToolCallingTool(clientParams);
const executeCode = createCodeExecutionTool(clientParams);

function cancelScenario(name, code) {
  return {
    name,
    run: async (signal, controller) => {
      setTimeout(() => controller.abort(new Error('harness: user pressed stop')), 1500);
      return invokeLikeToolNode(
        ptc,
        { code, tool_manifest: ['get_weather'], timeout: 30000 },
        { signal, programmatic: true },
      );
    },
    check: (r, ex) => {
      if (r.status !== 'error') return false;
      if (DIRECT) return true;
      const inflight = ex.filter((x) => x.path.endsWith('/exec/programmatic') && x.request_id != null);
      const last = inflight[inflight.length - 1];
      const cancels = exchanges.filter((x) => x.path.endsWith('/exec/programmatic/cancel'));
      return (
        last != null &&
        last.status === 'client aborted' &&
        cancels.some(
          (c) =>
            c.body?.request_id === last.request_id &&
            typeof c.response?.status === 'number' &&
            c.response.status >= 200 &&
            c.response.status < 300,
        )
      );
    },
  };
}

const scenarios = [
  {
    name: 'gather without import',
    run: (signal) =>
      invokeLikeToolNode(
        ptc,
        {
          intent: 'Checking the weather in Paris and Tokyo',
          code:
            'results = await asyncio.gather(get_weather(city="Paris"), get_weather(city="Tokyo"))\n' +
            'print([r["temp"] for r in results])',
          tool_manifest: ['get_weather'],
        },
        { signal, programmatic: true },
      ),
    check: (r) => r.status === 'success' && /stdout:\n\[15, 22\]\n?/.test(r.output),
  },
  {
    name: 'error caught',
    run: (signal) =>
      invokeLikeToolNode(
        ptc,
        {
          code:
            'try:\n' +
            '    await flaky_lookup()\n' +
            '    print("no error?")\n' +
            'except Exception as e:\n' +
            '    print("caught:", e)',
          tool_manifest: ['flaky_lookup'],
        },
        { signal, programmatic: true },
      ),
    check: (r) => r.status === 'success' && /caught: .*upstream service exploded/.test(r.output),
  },
  {
    name: 'name normalisation',
    run: (signal) =>
      invokeLikeToolNode(
        ptc,
        {
          code: 'r = await get_stock_price(symbol="ACME")\nprint(r["symbol"], r["price"])',
          tool_manifest: ['get-stock-price'],
        },
        { signal, programmatic: true },
      ),
    check: (r) =>
      r.status === 'success' &&
      /stdout:\nACME 42\.5/.test(r.output) &&
      toolCallsSeen.some((c) => c.name === 'get-stock-price' && c.input.symbol === 'ACME'),
  },
  {
    // tool_manifest: [] is how the model says "this code calls no tools"; the
    // client then posts to {base}/exec instead (ProgrammaticToolCalling.mjs 509, 524-535).
    name: 'no tools (tool_manifest=[])',
    run: (signal) =>
      invokeLikeToolNode(
        ptc,
        { code: 'print("no tools here", 6 * 7)', tool_manifest: [] },
        { signal, programmatic: true },
      ),
    check: (r) => r.status === 'success' && /stdout:\nno tools here 42/.test(r.output),
  },
  {
    // Without a manifest the client sends every code-callable tool to
    // /exec/programmatic, whether the code uses them or not (lines 503-508;
    // filterToolsByUsage, lines 198-214, is exported but no longer called).
    name: 'no tools (no manifest)',
    run: (signal) =>
      invokeLikeToolNode(ptc, { code: 'print("still no tools", 6 * 7)' }, { signal, programmatic: true }),
    check: (r) => r.status === 'success' && /stdout:\nstill no tools 42/.test(r.output),
  },
  {
    name: 'execute_code',
    run: (signal) =>
      invokeLikeToolNode(
        executeCode,
        { intent: 'Multiplying two numbers', lang: 'py', code: 'print(6 * 7)' },
        { signal, programmatic: false },
      ),
    check: (r) => r.status === 'success' && /stdout:\n42/.test(r.output),
  },
  // The agent run is aborted while the server is running the code: the
  // client posts {"request_id"} to {base}/exec/programmatic/cancel with the id
  // it put in X-LibreChat-Code-Request-ID on the request then in flight
  // (ProgrammaticToolCalling.mjs lines 256-307). Every request, the start and
  // each continuation, carries a fresh id. (The no-tool path to /exec carries
  // no id and cannot be cancelled, so both scenarios list a tool.)
  cancelScenario('cancel during start', 'n = 0\nwhile True:\n    n += 1'),
  cancelScenario(
    'cancel during continuation',
    'w = await get_weather(city="Paris")\nn = 0\nwhile True:\n    n += 1',
  ),
];

let failed = 0;
for (const s of scenarios) {
  if (ONLY && !ONLY.has(s.name)) continue;
  const controller = new AbortController();
  const deadline = setTimeout(
    () => controller.abort(new Error(`harness deadline ${SCENARIO_DEADLINE_MS} ms`)),
    SCENARIO_DEADLINE_MS,
  );
  const mark = exchanges.length;
  const seenMark = toolCallsSeen.length;
  let result;
  try {
    result = await s.run(controller.signal, controller);
  } catch (e) {
    result = { status: 'error', output: null, error: `harness: ${e?.stack ?? e}` };
  } finally {
    clearTimeout(deadline);
  }
  // give a cancel request (fire-and-forget inside the client, 2 s cap) time to land
  if (s.name.startsWith('cancel') && !DIRECT) await new Promise((r) => setTimeout(r, 2500));
  const ex = exchangesSince(mark);
  let ok = false;
  try {
    ok = Boolean(s.check(result, ex));
  } catch {
    ok = false;
  }
  if (!ok) failed++;
  const line = {
    scenario: s.name,
    ok,
    output: result.output,
    error: result.error ?? null,
    ...(result.artifact !== undefined ? { artifact: result.artifact } : {}),
    tool_calls: toolCallsSeen.slice(seenMark),
    ...(DIRECT ? {} : { http: ex }),
  };
  emit(line);
}

if (TRACE) console.error(JSON.stringify({ base_url_seen_by_client: getCodeBaseURL() }));
if (proxyServer) {
  proxyServer.closeAllConnections?.();
  proxyServer.close();
}
process.exit(failed === 0 ? 0 : 1);
