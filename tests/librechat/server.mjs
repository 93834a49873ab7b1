#!/usr/bin/env node
// LibreChat >= 0.8.6 against a running baton, as an operator wires it: its
// server side (librechat.mjs: Code API tokens, uploads, liveness, downloads,
// deletes, its own shell commands) and its tools from `@librechat/agents`
// (`execute_code`, `run_tools_with_code`) with `authHeaders` carrying the
// token. No API key anywhere.
//
// Environment:
//   BATON_URL                 the server's base URL (a trailing /v1 is fine)
//   LC_JWT_PRIVATE_KEY_FILE   the key LibreChat signs with (baton has its public half)
//   LC_JWT_KID                its kid (LibreChat's default: lc-codeapi-2026-05)
//   LC_JWT_ALG                EdDSA (default) or RS256
//   BATON_ONLY                optional comma-separated scenario names
//
// Output: one JSON line per scenario, {"scenario", "ok", "detail"}; exit 0
// only when every scenario passed.

import fs from 'node:fs';
import zlib from 'node:zlib';
import { CodeApiAuth, LibreChat, NANOID, primedRef } from './librechat.mjs';
import { invokeLikeToolNode, injectedRef } from './toolnode.mjs';

const BATON_URL = process.env.BATON_URL;
const keyFile = process.env.LC_JWT_PRIVATE_KEY_FILE;
if (!BATON_URL || !keyFile) {
  console.error('server.mjs: set BATON_URL and LC_JWT_PRIVATE_KEY_FILE');
  process.exit(2);
}
delete process.env.PROXY;
process.env.LIBRECHAT_CODE_BASEURL = BATON_URL.replace(/\/+$/, '');
const ONLY = process.env.BATON_ONLY ? new Set(process.env.BATON_ONLY.split(',').map((s) => s.trim())) : null;

const auth = new CodeApiAuth({
  privateKeyPem: fs.readFileSync(keyFile, 'utf8'),
  kid: process.env.LC_JWT_KID,
  alg: process.env.LC_JWT_ALG ?? 'EdDSA',
});
const lc = new LibreChat({ baseUrl: BATON_URL, auth, profile: 'default' });
const stateful = new LibreChat({ baseUrl: BATON_URL, auth, profile: 'stateful' });

// LibreChat user ids are Mongo ObjectIds; two users of one tenant, one of another.
const alice = { id: '6650c1e1f1a2b3c4d5e6f701', tenantId: 'acme' };
const bob = { id: '6650c1e1f1a2b3c4d5e6f702', tenantId: 'acme' };
const mallory = { id: '6650c1e1f1a2b3c4d5e6f701', tenantId: 'evil' };

const { createCodeExecutionTool, createProgrammaticToolCallingTool } = await import('@librechat/agents');
const { tool } = await import('@librechat/agents/langchain/tools');

// handleTools.js: the tool is created per request with the user's id, the
// primed files, and `authHeaders` minting the user's token.
function executeCodeTool(user, { files, profile = 'default', hint } = {}) {
  return createCodeExecutionTool({
    user_id: user.id,
    ...(files ? { files } : {}),
    authHeaders: async () => auth.headers(user),
    executionProfile: profile,
    ...(profile === 'stateful' ? { statefulSessions: true, runtimeSessionHint: hint } : {}),
  });
}

function status(error) {
  return error?.response?.status ?? String(error?.message ?? error);
}

async function expectStatus(promise, wanted) {
  try {
    await promise;
    return `expected ${wanted}, got 2xx`;
  } catch (error) {
    return status(error) === wanted ? null : `expected ${wanted}, got ${status(error)}`;
  }
}

// A small real PNG (16x16, grey), as an image a chat attaches.
function png() {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => {
    let c = 0xffffffff;
    for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(16, 0);
  ihdr.writeUInt32BE(16, 4);
  ihdr[8] = 8;
  ihdr[9] = 0;
  const rows = Buffer.concat(Array.from({ length: 16 }, (_, y) => Buffer.from([0, ...Array(16).fill(y * 16)])));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

const CSV = 'city,temp\nParis,15\nTokyo,22\nLima,19\n';
const state = {};

const scenarios = [
  {
    // process.js priming: a chat attachment (kind user, id = the user) is
    // uploaded, then probed before reuse.
    name: 'attachment upload and liveness',
    run: async () => {
      const up = await lc.upload(alice, { data: CSV, filename: 'data.csv', kind: 'user', id: alice.id });
      state.csv = { ...up, name: 'data.csv', kind: 'user', id: alice.id };
      const info = await lc.fileInfo(alice, { ...state.csv, file_id: up.file_id });
      const problems = [];
      if (!NANOID.test(up.storage_session_id) || !NANOID.test(up.file_id)) problems.push(`ids ${up.storage_session_id} ${up.file_id}`);
      if (!LibreChat.isActive(info)) problems.push(`not active: ${JSON.stringify(info)}`);
      if (info?.originalFilename !== 'data.csv') problems.push(`originalFilename ${info?.originalFilename}`);
      if (up.raw.files[0].filename !== 'data.csv') problems.push('filename not echoed');
      return problems;
    },
  },
  {
    name: 'execute_code reads the attachment and its output is harvested',
    run: async () => {
      const files = [primedRef(state.csv, state.csv)];
      const code = [
        'import csv',
        "rows = list(csv.DictReader(open('/mnt/data/data.csv')))",
        "mean = sum(int(r['temp']) for r in rows) / len(rows)",
        "open('/mnt/data/report.txt', 'w').write(f'mean={mean:.2f}\\n')",
        "print('rows', len(rows), 'mean', round(mean, 2))",
      ].join('\n');
      const r = await invokeLikeToolNode(executeCodeTool(alice, { files }), { lang: 'py', code });
      const problems = [];
      if (r.status !== 'success' || !/stdout:\nrows 3 mean 18\.67/.test(r.output)) problems.push(`output ${JSON.stringify(r)}`);
      const outputs = (r.artifact?.files ?? []).filter((f) => f.inherited !== true);
      const report = outputs.find((f) => f.name === 'report.txt');
      if (!report) return [...problems, `no report.txt in ${JSON.stringify(r.artifact)}`];
      // The output harvest: session_id = file.storage_session_id ?? the result's.
      const sid = report.storage_session_id ?? r.artifact.session_id;
      if (!NANOID.test(sid) || !NANOID.test(report.id)) problems.push(`ids ${sid}/${report.id} fail LibreChat's proxy check`);
      const got = await lc.download(alice, { session_id: sid, id: report.id });
      if (got.bytes.toString() !== 'mean=18.67\n') problems.push(`download ${got.bytes}`);
      if (!String(got.headers['content-type']).startsWith('text/plain')) problems.push(`content-type ${got.headers['content-type']}`);
      state.report = { session_id: sid, id: report.id, file_id: report.id, storage_session_id: sid, name: 'report.txt' };
      // Another user of the tenant, and the same user id in another
      // tenant, cannot read it: not found, as if it never existed.
      for (const other of [bob, mallory]) {
        const refused = await expectStatus(lc.download(other, { session_id: sid, id: report.id }), 404);
        if (refused) problems.push(`${other.id}@${other.tenantId}: ${refused}`);
      }
      return problems;
    },
  },
  {
    // process.js: agent files are uploaded with kind agent, id = the agent;
    // any user of the tenant who runs the agent reaches them.
    name: 'agent files are shared within the tenant only',
    run: async () => {
      const agent = 'agent_3wLkPq9sT0mF';
      const up = await lc.upload(alice, { data: 'rule 1: be kind\n', filename: 'rules.txt', kind: 'agent', id: agent });
      const ref = primedRef(up, { name: 'rules.txt', kind: 'agent', id: agent });
      const code = "print(open('/mnt/data/rules.txt').read().strip())";
      const problems = [];
      const asBob = await invokeLikeToolNode(executeCodeTool(bob, { files: [ref] }), { lang: 'py', code });
      if (!/stdout:\nrule 1: be kind/.test(asBob.output)) problems.push(`bob: ${asBob.output}`);
      const asMallory = await invokeLikeToolNode(executeCodeTool(mallory, { files: [ref] }), { lang: 'py', code });
      if (asMallory.status !== 'error' || !/rejected/.test(asMallory.output)) problems.push(`mallory: ${asMallory.output}`);
      // bob naming alice's own attachment (kind user) reaches nothing.
      const stolen = await invokeLikeToolNode(
        executeCodeTool(bob, { files: [{ ...primedRef(state.csv, state.csv), resource_id: alice.id }] }),
        { lang: 'py', code: "print(open('/mnt/data/data.csv').read())" },
      );
      if (stolen.status !== 'error' || /Paris/.test(stolen.output)) problems.push(`bob read alice's file: ${stolen.output}`);
      const probe = await lc.fileInfo(bob, { storage_session_id: up.storage_session_id, file_id: up.file_id, kind: 'agent', id: agent });
      if (!LibreChat.isActive(probe)) problems.push('bob cannot probe the agent file');
      if ((await lc.fileInfo(mallory, { storage_session_id: up.storage_session_id, file_id: up.file_id, kind: 'agent', id: agent })) !== null) {
        problems.push('mallory probes the agent file');
      }
      return problems;
    },
  },
  {
    // skills: a batch, read_only, kind skill with a version; code reads the
    // files and cannot change them.
    name: 'skill files in a read-only batch',
    run: async () => {
      const skill = '6650c1e1f1a2b3c4d5e6f7ff';
      const files = [
        { filename: 'skills/pdf/SKILL.md', data: '# PDF skill\nUse scripts/extract.py\n' },
        { filename: 'skills/pdf/scripts/extract.py', data: "print('extracting')\n" },
        // LibreChat sends this name as it is (only control characters are
        // replaced); a bidirectional override can make a name show as
        // another, and baton refuses it, for this file only.
        { filename: 'evil\u202Etxt.exe', data: 'no' },
      ];
      const up = await lc.batchUpload(alice, { files, kind: 'skill', id: skill, version: 3, readOnly: true });
      const problems = [];
      if (up.raw.message !== 'partial_success' || up.raw.succeeded !== 2 || up.raw.failed !== 1) problems.push(`batch ${JSON.stringify(up.raw)}`);
      const byName = new Map(up.files.map((f) => [f.filename, f.fileId]));
      const refs = ['skills/pdf/SKILL.md', 'skills/pdf/scripts/extract.py'].map((name) => ({
        id: byName.get(name), resource_id: skill, storage_session_id: up.storage_session_id, name, kind: 'skill', version: 3,
      }));
      if (refs.some((r) => !r.id)) return [...problems, `names not matched: ${JSON.stringify(up.files)}`];
      const code = [
        "print(open('/mnt/data/skills/pdf/SKILL.md').read().splitlines()[0])",
        'try:',
        "    open('/mnt/data/skills/pdf/SKILL.md', 'w').write('changed')",
        'except PermissionError as e:',
        "    print('refused:', e.strerror)",
        "exec(open('/mnt/data/skills/pdf/scripts/extract.py').read())",
      ].join('\n');
      const r = await invokeLikeToolNode(executeCodeTool(bob, { files: refs }), { lang: 'py', code });
      if (!/stdout:\n# PDF skill\nrefused: Permission denied\nextracting/.test(r.output)) problems.push(`run ${r.output}`);
      if ((r.artifact?.files ?? []).length !== 0) problems.push(`skill files came back as outputs: ${JSON.stringify(r.artifact.files)}`);
      const info = await lc.fileInfo(bob, { storage_session_id: up.storage_session_id, file_id: refs[0].id, kind: 'skill', id: skill, version: 3 });
      if (info?.readOnly !== true) problems.push(`metadata ${JSON.stringify(info)}`);
      // Another version of the skill is another resource.
      if ((await lc.fileInfo(bob, { storage_session_id: up.storage_session_id, file_id: refs[0].id, kind: 'skill', id: skill, version: 4 })) !== null) {
        problems.push('version 4 reaches version 3');
      }
      return problems;
    },
  },
  {
    // read_file, create_file/edit_file and image reads: LibreChat's own
    // shell commands through /exec.
    name: 'read_file, write and image reads through the shell',
    run: async () => {
      const problems = [];
      const csvRef = primedRef(state.csv, state.csv);
      const read = await lc.readSandboxFile(alice, { filePath: '/mnt/data/data.csv', files: [csvRef] });
      if (read?.content !== CSV) problems.push(`cat ${JSON.stringify(read)}`);
      const relative = await lc.readSandboxFile(alice, { filePath: 'data.csv', files: [csvRef] });
      if (relative?.content !== CSV) problems.push('a relative path is not under /mnt/data');
      try {
        await lc.readSandboxFile(alice, { filePath: '/mnt/data/missing.txt' });
        problems.push('a missing file read as empty');
      } catch (error) {
        if (!/no such file or directory/i.test(error.message)) problems.push(`missing: ${error.message}`);
      }
      const odd = "/mnt/data/quote'breakout $(rm -rf).txt";
      const wrote = await lc.writeSandboxFile(alice, { filePath: odd, content: 'héllo\n' });
      if (!/WROTE 7 bytes/.test(wrote.stdout)) problems.push(`write ${JSON.stringify(wrote)}`);
      const written = (wrote.files ?? []).find((f) => f.name === "quote'breakout $(rm -rf).txt");
      if (!written) return [...problems, `the write is not an output: ${JSON.stringify(wrote.files)}`];
      // The next call gets the file back the way ToolNode injects it.
      const injected = [injectedRef(written, wrote.session_id)];
      const back = await lc.readSandboxFile(alice, { filePath: odd, session_id: wrote.session_id, files: injected });
      if (back?.content !== 'héllo\n') problems.push(`read back ${JSON.stringify(back)}`);
      const image = png();
      const up = await lc.upload(alice, { data: image, filename: 'chart.png', kind: 'user', id: alice.id });
      const imageRef = primedRef(up, { name: 'chart.png', kind: 'user', id: alice.id });
      const windows = await lc.readSandboxImage(alice, { filePath: '/mnt/data/chart.png', files: [imageRef], chunkBytes: 48 });
      if (!windows.bytes?.equals(image)) problems.push(`image ${windows.bytes?.length} of ${image.length} bytes`);
      const down = await lc.download(alice, { session_id: up.storage_session_id, id: up.file_id });
      if (down.headers['content-type'] !== 'image/png') problems.push(`image content-type ${down.headers['content-type']}`);
      return problems;
    },
  },
  {
    name: 'run_tools_with_code with a token',
    run: async () => {
      const seen = [];
      const impl = tool(async ({ city }) => { seen.push(city); return { city, temp: city.length }; }, {
        name: 'get_weather',
        description: 'Current weather for a city.',
        schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      });
      const def = { name: 'get_weather', description: 'Current weather for a city.', parameters: impl.schema, allowed_callers: ['code_execution'] };
      const ptc = createProgrammaticToolCallingTool({ authHeaders: async () => auth.headers(alice), executionProfile: 'default' });
      const code = 'ws = await asyncio.gather(get_weather(city="Paris"), get_weather(city="Lima"))\nprint(sum(w["temp"] for w in ws))';
      const r = await invokeLikeToolNode(ptc, { code, tool_manifest: ['get_weather'] }, {
        programmatic: true, toolMap: new Map([['get_weather', impl]]), toolDefs: [def],
      });
      const problems = [];
      if (r.status !== 'success' || !/stdout:\n9/.test(r.output)) problems.push(`output ${r.output}`);
      if (seen.sort().join() !== 'Lima,Paris') problems.push(`calls ${seen}`);
      // Code that selects no tools goes to /exec in LibreChat's wrapper; it
      // runs as the program itself (globals, the model's own line numbers).
      const plain = await invokeLikeToolNode(ptc, {
        code: 'x = 6 * 7\nprint(x, "x" in globals())\nraise ValueError("line three")', tool_manifest: [],
      }, { programmatic: true, toolMap: new Map(), toolDefs: [] });
      if (!/42 True/.test(plain.output) || !/line 3, in <module>/.test(plain.output)) problems.push(`wrapped: ${plain.output}`);
      return problems;
    },
  },
  {
    // Stateful agents: prewarm, then calls in one runtime session keep
    // /mnt/data and the Python names of earlier calls; another user's hint
    // of the same text is another session.
    name: 'stateful runtime session keeps /mnt/data and Python names',
    run: async () => {
      const hint = 'v2:user:0123456789abcdef0123456789abcdef';
      const problems = [];
      const warm = await stateful.prewarm(alice, hint);
      if (!warm.ok) problems.push(`prewarm ${warm.status} ${warm.body}`);
      const first = await invokeLikeToolNode(
        executeCodeTool(alice, { profile: 'stateful', hint }),
        { lang: 'bash', code: 'mkdir -p work && echo step1 > work/log.txt && ls work' },
      );
      const second = await invokeLikeToolNode(
        executeCodeTool(alice, { profile: 'stateful', hint }),
        { lang: 'py', code: "import os\nopen('work/log.txt','a').write('step2\\n')\nprint(open('work/log.txt').read().split())" },
      );
      if (!/\['step1', 'step2'\]/.test(second.output)) problems.push(`second call: ${second.output}`);
      const ids = [first, second].map((r) => r.artifact?.runtime_session_id);
      if (!ids[0] || ids[0] !== ids[1]) problems.push(`runtime sessions ${ids}`);
      if (second.artifact?.runtime_status !== 'reused') problems.push(`status ${second.artifact?.runtime_status}`);
      await invokeLikeToolNode(
        executeCodeTool(alice, { profile: 'stateful', hint }),
        { lang: 'py', code: 'steps = len(open("work/log.txt").read().split())\ndef double(n):\n    return 2 * n' },
      );
      const names = await invokeLikeToolNode(
        executeCodeTool(alice, { profile: 'stateful', hint }),
        { lang: 'py', code: 'print("steps", double(steps))' },
      );
      if (!/steps 4/.test(names.output)) problems.push(`Python names not kept: ${names.output}`);
      const other = await invokeLikeToolNode(
        executeCodeTool(bob, { profile: 'stateful', hint }),
        { lang: 'bash', code: 'ls work 2>&1; true' },
      );
      if (!/No such file or directory/.test(other.output)) problems.push(`bob sees alice's session: ${other.output}`);
      return problems;
    },
  },
  {
    name: 'delete as LibreChat deletes',
    run: async () => {
      const up = await lc.upload(alice, { data: 'temp', filename: 'temp.txt', kind: 'user', id: alice.id });
      const ref = { ...up, kind: 'user', id: alice.id };
      const problems = [];
      // Another user's delete finds nothing, and deletes nothing.
      if ((await lc.deleteFile(bob, ref)) !== 'gone') problems.push("bob's delete did something");
      if (!LibreChat.isActive(await lc.fileInfo(alice, ref))) problems.push("alice's file went with bob's delete");
      if ((await lc.deleteFile(alice, ref)) !== 'deleted') problems.push('not deleted');
      if ((await lc.fileInfo(alice, ref)) !== null) problems.push('still there');
      if ((await lc.deleteFile(alice, ref)) !== 'gone') problems.push('a second delete is not a 404');
      return problems;
    },
  },
  {
    name: 'unsupported languages are permanent',
    run: async () => {
      const r = await invokeLikeToolNode(executeCodeTool(alice), { lang: 'go', code: 'package main' });
      return /not supported by the selected environment/.test(r.output) ? [] : [`go: ${r.output}`];
    },
  },
  {
    // codeapi.ts: a token is reused for 30 s (the same jti on many calls).
    name: 'tokens are reused',
    run: async () => (auth.minted * 2 < auth.issued ? [] : [`minted ${auth.minted} tokens for ${auth.issued} calls`]),
  },
];

let failed = 0;
for (const s of scenarios) {
  if (ONLY && !ONLY.has(s.name)) continue;
  let problems;
  try {
    problems = await s.run();
  } catch (error) {
    problems = [`threw: ${error?.stack ?? error} ${JSON.stringify(error?.response?.data ?? '')}`];
  }
  const ok = problems.length === 0;
  if (!ok) failed++;
  process.stdout.write(`${JSON.stringify({ scenario: s.name, ok, detail: problems })}\n`);
}
process.exit(failed === 0 ? 0 : 1);
