// Invokes a LibreChat tool the way the package's ToolNode does
// (dist/esm/tools/ToolNode.mjs: the tool call's invokeParams, with the code
// session's `session_id` and `_injected_files` beside the args, then
// `tool.invoke(invokeParams, runtime)`), and turns a tool's error into the
// string the model sees (`Error: <message>\n Please fix your mistakes.`).

import { randomUUID } from 'node:crypto';

export async function invokeLikeToolNode(lcTool, args, { signal, programmatic, toolMap, toolDefs, session } = {}) {
  const call = { id: `call_${randomUUID().slice(0, 8)}`, name: lcTool.name, args };
  let invokeParams = { ...call, type: 'tool_call', stepId: undefined, turn: 0 };
  if (programmatic) {
    invokeParams = {
      ...invokeParams,
      toolMap,
      toolDefs,
      disallowedToolDefs: [],
      programmaticToolName: call.name,
    };
  }
  // ToolNode's code session: the last execution's session id and its files
  // (each as `toInjectedFileRef` makes it), injected beside the args.
  if (session?.session_id) {
    invokeParams.session_id = session.session_id;
    if (session.files?.length) invokeParams._injected_files = session.files;
  }
  if (session?.runtime_session_hint) invokeParams._runtime_session_hint = session.runtime_session_hint;
  const config = { signal, configurable: { thread_id: 'baton-harness', run_id: randomUUID() } };
  const runtime = { ...config, toolCallId: call.id, config, state: {}, store: null, writer: null };
  try {
    const msg = await lcTool.invoke(invokeParams, runtime);
    return { status: 'success', output: msg.content, artifact: msg.artifact };
  } catch (e) {
    return {
      status: 'error',
      output: `Error: ${e.message}\n Please fix your mistakes.`,
      error: e.message,
      error_class: e.name,
    };
  }
}

// ToolNode.ts toInjectedFileRef: a file of the code session as the next call
// carries it (kind defaults to user, resource_id to the file id).
export function injectedRef(file, execSessionId) {
  const base = {
    id: file.id,
    resource_id: file.resource_id ?? file.id,
    name: file.name,
    storage_session_id: file.storage_session_id ?? execSessionId,
  };
  const kind = file.kind ?? 'user';
  if (kind === 'skill' && file.version != null) return { ...base, kind: 'skill', version: file.version };
  if (kind === 'agent') return { ...base, kind: 'agent' };
  return { ...base, kind: 'user' };
}
