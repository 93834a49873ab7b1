// LibreChat's server side as it talks to a Code API, for the tests: how
// LibreChat >= 0.8.6 mints its Code API tokens, uploads files, checks their
// liveness, downloads outputs, deletes files, and sends its own shell
// commands. Re-implemented here from the behaviour of LibreChat's sources
// (danny-avila/LibreChat; the file of each function is named on it), with the
// same libraries LibreChat uses for the wire (Node's crypto, axios, form-data),
// so that the requests baton receives are the ones LibreChat sends.
//
// The research notes with the quoted sources are in the repository's shared
// notes (`librechat-code-api-as-deployed.md`, `librechat-bash-commands.md`).

import { createHash, createPrivateKey, randomUUID, sign as cryptoSign } from 'node:crypto';
import axios from 'axios';
import FormData from 'form-data';

const DEFAULT_KID = 'lc-codeapi-2026-05';
const TOKEN_REUSE_SAFETY_WINDOW_SECONDS = 30;
export const MAX_FILE_SIZE = 150 * 1024 * 1024;
export const NANOID = /^[A-Za-z0-9_-]{21}$/;

// ---------------------------------------------------------------------------
// packages/api/src/auth/codeapi.ts: the Code API token.
// Header {alg, typ: 'JWT', kid}; claims iss, aud (one string), sub, iat, nbf,
// exp (<= 300 s later), jti (a UUID), tenant_id, role, principal_source,
// auth_context_hash (SHA-256 hex of the JSON of chc_user_id, org_id,
// principal_source, role, service_id, sub, tenant_id in that key order,
// missing ones ''); EdDSA signs with crypto.sign(null, ...), RS256 with
// 'RSA-SHA256'. A token is reused for 30 s while it has 30 s left.
// ---------------------------------------------------------------------------

export class CodeApiAuth {
  constructor({ privateKeyPem, alg = 'EdDSA', kid = DEFAULT_KID, issuer = 'librechat',
    audience = 'codeapi', ttlSeconds = 300, cacheSeconds = 30, singleTenantId = 'legacy' }) {
    this.key = createPrivateKey(privateKeyPem.replace(/\\n/g, '\n').trim());
    Object.assign(this, { alg, kid, issuer, audience, ttlSeconds, cacheSeconds, singleTenantId });
    this.cache = new Map();
    this.minted = 0;
    this.issued = 0;
  }

  static contextHash({ userId, tenantId, role, principalSource }) {
    const canonical = {
      chc_user_id: '',
      org_id: '',
      principal_source: principalSource,
      role,
      service_id: '',
      sub: userId,
      tenant_id: tenantId,
    };
    return createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
  }

  claims(user, now) {
    const tenantId = user.tenantId ?? this.singleTenantId;
    const role = user.role ?? 'USER';
    const principalSource = 'librechat_jwt';
    return {
      iss: this.issuer,
      aud: this.audience,
      sub: user.id,
      iat: now,
      nbf: now,
      exp: now + this.ttlSeconds,
      jti: randomUUID(),
      tenant_id: tenantId,
      role,
      principal_source: principalSource,
      auth_context_hash: CodeApiAuth.contextHash({ userId: user.id, tenantId, role, principalSource }),
    };
  }

  sign(header, claims) {
    const b64 = (value) => Buffer.from(value).toString('base64url');
    const input = `${b64(JSON.stringify(header))}.${b64(JSON.stringify(claims))}`;
    const signature = cryptoSign(this.alg === 'RS256' ? 'RSA-SHA256' : null, Buffer.from(input), this.key);
    return `${input}.${b64(signature)}`;
  }

  token(user) {
    this.issued += 1;
    const now = Math.floor(Date.now() / 1000);
    const key = `${user.id}:${user.tenantId ?? ''}:${user.role ?? ''}`;
    const cached = this.cache.get(key);
    if (cached && cached.cachedUntil > now && cached.expiresAt > now + TOKEN_REUSE_SAFETY_WINDOW_SECONDS) {
      return cached.token;
    }
    const claims = this.claims(user, now);
    const token = this.sign({ alg: this.alg, typ: 'JWT', kid: this.kid }, claims);
    this.minted += 1;
    this.cache.set(key, {
      token,
      expiresAt: claims.exp,
      cachedUntil: Math.min(now + this.cacheSeconds, claims.exp - TOKEN_REUSE_SAFETY_WINDOW_SECONDS),
    });
    return token;
  }

  // getCodeApiAuthHeaders(req)
  headers(user) {
    return { Authorization: `Bearer ${this.token(user)}` };
  }
}

// ---------------------------------------------------------------------------
// packages/api/src/files/code/identity.ts and form.ts: the form's identity
// fields (kind, id, version for skills) and the file part (its filename the
// basename; a safe nested path goes as form-data's `filepath`, so the
// Content-Disposition carries the relative path; control characters become _).
// ---------------------------------------------------------------------------

export function identityQuery({ kind, id, version }) {
  const params = new URLSearchParams({ kind, id });
  if (version != null) params.set('version', String(version));
  return `?${params.toString()}`;
}

function appendIdentity(form, { kind, id, version }) {
  if (!['user', 'agent', 'skill'].includes(kind)) throw new Error(`invalid kind "${kind}"`);
  if (!id) throw new Error(`missing id for kind "${kind}"`);
  if ((kind === 'skill') !== (version != null)) throw new Error('version is for skills only, and required there');
  form.append('kind', kind);
  form.append('id', id);
  if (version != null) form.append('version', String(version));
}

function safeName(name) {
  return Array.from(name, (c) => (c.charCodeAt(0) <= 0x1f || c.charCodeAt(0) === 0x7f ? '_' : c)).join('');
}

function fileOptions(filename) {
  const normalized = filename.replace(/\\/g, '/');
  const base = safeName(normalized.split('/').pop() || 'file');
  if (normalized === filename && filename === base) return { filename: safeName(filename) };
  const segments = normalized.split('/');
  const safe = !normalized.startsWith('/') && /^[\p{L}\p{M}\p{N}._\-/]+$/u.test(normalized)
    && segments.every((s) => s !== '' && s !== '.' && s !== '..');
  return safe ? { filename: base, filepath: normalized } : { filename: base };
}

// ---------------------------------------------------------------------------
// The client LibreChat's server uses (its own axios instance, agents kept
// alive), and the headers of every call.
// ---------------------------------------------------------------------------

export class LibreChat {
  constructor({ baseUrl, auth, profile }) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.auth = auth;
    this.profile = profile;
    this.http = axios.create({ validateStatus: (s) => s >= 200 && s < 300 });
  }

  headers(user, extra = {}) {
    return {
      'User-Agent': 'LibreChat/1.0',
      ...(this.auth ? this.auth.headers(user) : {}),
      ...(this.profile ? { 'X-CodeAPI-Expected-Profile': this.profile } : {}),
      ...extra,
    };
  }

  // api/server/services/Files/Code/crud.js uploadCodeEnvFile: one file, a
  // new storage session per upload; requires message 'success',
  // storage_session_id and files[0].fileId.
  async upload(user, { data, filename, kind, id, version }) {
    const form = new FormData();
    appendIdentity(form, { kind, id, version });
    form.append('file', Buffer.from(data), fileOptions(filename));
    const response = await this.http.post(`${this.baseUrl}/upload`, form, {
      headers: { ...form.getHeaders(), 'Content-Type': 'multipart/form-data', ...this.headers(user, { 'User-Id': user.id }) },
      timeout: 120000, maxContentLength: MAX_FILE_SIZE, maxBodyLength: MAX_FILE_SIZE,
    });
    const result = response.data;
    if (result.message !== 'success') throw new Error(`Error uploading file: ${result.message}`);
    return { storage_session_id: result.storage_session_id, file_id: result.files[0].fileId, raw: result };
  }

  // crud.js batchUploadCodeEnvFiles: several files, one storage session,
  // `read_only=true` for skills; results matched by filename.
  async batchUpload(user, { files, kind, id, version, readOnly = false }) {
    const form = new FormData();
    appendIdentity(form, { kind, id, version });
    if (readOnly) form.append('read_only', 'true');
    for (const file of files) form.append('file', Buffer.from(file.data), fileOptions(file.filename));
    const response = await this.http.post(`${this.baseUrl}/upload/batch`, form, {
      headers: { ...form.getHeaders(), 'Content-Type': 'multipart/form-data', ...this.headers(user, { 'User-Id': user.id }) },
      timeout: 120000, maxContentLength: MAX_FILE_SIZE, maxBodyLength: MAX_FILE_SIZE,
    });
    const result = response.data;
    if (!result || typeof result !== 'object' || !result.storage_session_id || !Array.isArray(result.files)) {
      throw new Error(`Unexpected batch upload response: ${JSON.stringify(result).slice(0, 200)}`);
    }
    if (result.message === 'error') throw new Error('All files in batch upload failed');
    const files2 = result.files
      .filter((f) => f.status === 'success' && f.fileId)
      .map((f) => ({ fileId: f.fileId, filename: f.filename }));
    return { storage_session_id: result.storage_session_id, files: files2, raw: result };
  }

  // packages/api/src/files/code/priming.ts getCodeFileInfo: the object's
  // metadata, null on any failure (a cache miss: LibreChat uploads again).
  async fileInfo(user, ref) {
    try {
      const response = await this.http.get(
        `${this.baseUrl}/sessions/${ref.storage_session_id}/objects/${ref.file_id}${identityQuery(ref)}`,
        { headers: this.headers(user), timeout: 5000 },
      );
      return response.data;
    } catch {
      return null;
    }
  }

  // checkCodeFileActive: alive while lastModified is under 23 hours old.
  static isActive(info) {
    return info?.lastModified != null && (Date.now() - new Date(info.lastModified)) / 3_600_000 < 23;
  }

  // api/server/services/Files/Code/process.js downloadCodeOutputBuffer: an
  // output, read back as its creator's (kind=user, id=<user id>).
  async download(user, { session_id, id }) {
    const response = await this.http.get(
      `${this.baseUrl}/download/${session_id}/${id}${identityQuery({ kind: 'user', id: user.id })}`,
      { headers: this.headers(user), responseType: 'arraybuffer', timeout: 15000 },
    );
    return { bytes: Buffer.from(response.data), headers: response.headers };
  }

  // crud.js deleteCodeEnvFile: the objects route, then the files route on
  // 404/405; a final 404 counts as deleted.
  async deleteFile(user, ref) {
    const query = identityQuery(ref);
    const urls = [
      `${this.baseUrl}/sessions/${ref.storage_session_id}/objects/${ref.file_id}${query}`,
      `${this.baseUrl}/files/${ref.storage_session_id}/${ref.file_id}${query}`,
    ];
    let lastError;
    for (const url of urls) {
      try {
        await this.http.delete(url, { headers: this.headers(user), timeout: 15000 });
        return 'deleted';
      } catch (error) {
        lastError = error;
        if (![404, 405].includes(error.response?.status)) throw error;
      }
    }
    if (lastError?.response?.status === 404) return 'gone';
    throw lastError;
  }

  async exec(user, body, { timeout = 15000 } = {}) {
    const response = await this.http.post(`${this.baseUrl}/exec`, body, {
      headers: { 'Content-Type': 'application/json', ...this.headers(user) },
      timeout,
    });
    return response.data;
  }

  // process.js readSandboxFile: `cat '<path>'`, each ' as '\''; throws the
  // stderr when there is no stdout.
  async readSandboxFile(user, { filePath, session_id, files, runtime_session_hint }) {
    const code = `cat '${filePath.replace(/'/g, `'\\''`)}'`;
    const result = await this.exec(user, sandboxBody({ code, session_id, runtime_session_hint, files }));
    if (result.stderr && (result.stdout == null || result.stdout === '')) throw new Error(String(result.stderr).trim());
    if (result.stdout == null) return null;
    return { content: String(result.stdout) };
  }

  // process.js writeSandboxFile: a python3 heredoc decoding a base64 JSON
  // payload {file_path, content_b64}; the reply's session_id and files go on.
  async writeSandboxFile(user, { filePath, content, session_id, files, runtime_session_hint }) {
    const payload = Buffer.from(JSON.stringify({
      file_path: filePath, content_b64: Buffer.from(content, 'utf8').toString('base64'),
    }), 'utf8').toString('base64');
    const code = [
      "python3 - <<'PY'",
      'import base64, json, os',
      `payload = ${JSON.stringify(payload)}`,
      "data = json.loads(base64.b64decode(payload).decode('utf-8'))",
      "path = data['file_path']",
      "content = base64.b64decode(data['content_b64'])",
      'parent = os.path.dirname(path)',
      'if parent:',
      '    os.makedirs(parent, exist_ok=True)',
      "with open(path, 'wb') as f:",
      '    f.write(content)',
      'print(f"WROTE {len(content)} bytes to {path}")',
      'PY',
    ].join('\n');
    const result = await this.exec(user, sandboxBody({ code, session_id, runtime_session_hint, files }));
    if (result.stderr && (result.stdout == null || result.stdout === '')) throw new Error(String(result.stderr).trim());
    return { stdout: result.stdout, stderr: result.stderr, session_id: result.session_id, files: result.files };
  }

  // packages/api/src/files/code/image.ts: the image read in windows of
  // base64 over stdout (a python3 heredoc per window); `status: 'OL'`
  // halves the window.
  async readSandboxImage(user, { filePath, limit = 1024 * 1024, chunkBytes = 48960, session_id, files }) {
    const chunks = [];
    let offset = 0;
    let total = null;
    for (let call = 0; call < 20; call++) {
      const code = imageWindowCode({ filePath, limit, offset, chunkBytes });
      const result = await this.exec(user, sandboxBody({ code, session_id, files }));
      if (result.status === 'OL') {
        chunkBytes = Math.max(Math.floor(chunkBytes / 2 / 3) * 3, 1536);
        continue;
      }
      const stdout = result.stdout == null ? '' : String(result.stdout);
      if (result.stderr && stdout === '') throw new Error(String(result.stderr).trim());
      const lines = stdout.split('\n').map((l) => l.trim()).filter(Boolean);
      const window = JSON.parse(lines[lines.length - 1]);
      if (window.error) throw new Error(window.error);
      if (window.too_large) return { tooLarge: true, bytes: window.bytes };
      if (total == null) total = window.total;
      else if (window.total !== total) throw new Error(`"${filePath}" changed while being read from the sandbox`);
      chunks.push(Buffer.from(window.b64, 'base64'));
      offset += window.n;
      if (window.n === 0 || offset >= total) break;
    }
    return { bytes: Buffer.concat(chunks), total };
  }

  // packages/api/src/agents/prewarm.ts: `true` in the runtime session.
  async prewarm(user, hint) {
    const response = await fetch(`${this.baseUrl}/exec`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...this.headers(user) },
      body: JSON.stringify({ lang: 'bash', code: 'true', runtime_session_hint: hint }),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await response.text();
    return { ok: response.ok, status: response.status, body: text };
  }
}

function sandboxBody({ code, session_id, runtime_session_hint, files }) {
  return {
    lang: 'bash',
    code,
    ...(session_id ? { session_id } : {}),
    ...(runtime_session_hint ? { runtime_session_hint } : {}),
    ...(files && files.length > 0 ? { files } : {}),
  };
}

export function imageWindowCode({ filePath, limit, offset, chunkBytes }) {
  const payload = Buffer.from(JSON.stringify({ file_path: filePath, limit, offset, chunk: chunkBytes }), 'utf8').toString('base64');
  return [
    "python3 - <<'PY'",
    'import base64, json, os, stat',
    `payload = ${JSON.stringify(payload)}`,
    "data = json.loads(base64.b64decode(payload).decode('utf-8'))",
    "p = data['file_path']",
    "limit = data['limit']",
    "offset = data['offset']",
    "chunk = data['chunk']",
    'try:',
    '    st = os.stat(p)',
    'except OSError as e:',
    '    print(json.dumps({"error": str(e)}))',
    '    raise SystemExit(0)',
    'if not stat.S_ISREG(st.st_mode):',
    '    print(json.dumps({"error": "not a regular file"}))',
    '    raise SystemExit(0)',
    'if st.st_size > limit:',
    '    print(json.dumps({"too_large": True, "bytes": st.st_size}))',
    '    raise SystemExit(0)',
    "with open(p, 'rb') as f:",
    '    f.seek(offset)',
    '    raw = f.read(chunk)',
    'print(json.dumps({"total": st.st_size, "n": len(raw), "b64": base64.b64encode(raw).decode("ascii")}))',
    'PY',
  ].join('\n');
}

// api/server/services/Files/Code/process.js pushFile: a primed file's ref.
export function primedRef({ file_id, storage_session_id }, { name, kind, id, version }) {
  return {
    id: file_id,
    resource_id: id,
    storage_session_id,
    name,
    kind,
    ...(kind === 'skill' ? { version } : {}),
  };
}
