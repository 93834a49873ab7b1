// baton's console: the executions of one API key, one execution's timeline,
// its paused frame, cancel; its Python sessions, their cells and names.
// Talks only to this server's JSON API.
//
// Invariants:
// - The API key lives in one variable of this script: never in storage, a
//   cookie or the URL. Reloading the page forgets it.
// - Every value that came from the server (output, inputs, answers, locals,
//   error texts) reaches the page through textContent, never as markup.
"use strict";

(() => {
  let apiKey = null;
  let nextCursor = null;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      tr.appendChild(cell instanceof Node ? wrap("td", cell) : el("td", cell));
    }
    return tr;
  }

  function wrap(tag, child) {
    const node = document.createElement(tag);
    node.appendChild(child);
    return node;
  }

  function when(seconds) {
    if (!seconds) return "";
    return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  function banner(text) {
    const node = $("banner");
    node.textContent = text || "";
    node.hidden = !text;
  }

  async function api(method, path) {
    const response = await fetch(path, {
      method,
      headers: { "x-api-key": apiKey },
      cache: "no-store",
      credentials: "omit",
    });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const said = body && body.error ? body.error : response.statusText;
      const hint = response.status === 401 ? "The API key was refused: " : "";
      throw new Error(`${hint}${said} (HTTP ${response.status})`);
    }
    return body;
  }

  function connected(yes) {
    $("list-pane").hidden = !yes;
    $("sessions-pane").hidden = !yes;
    $("forget").hidden = !yes;
    if (!yes) {
      $("detail-pane").hidden = true;
      $("session-box").hidden = true;
    }
  }

  async function loadSessions() {
    const page = await api("GET", "/sessions");
    const body = $("sessions").tBodies[0];
    body.replaceChildren();
    for (const session of page.sessions) {
      const shortId = el("code", `${session.session_id.slice(0, 15)}…`);
      shortId.title = session.session_id;
      const tr = row([
        when(session.created_at).replace(" UTC", ""),
        shortId,
        el("span", session.status, `status ${session.status}`),
        session.cells,
        when(session.expires_at).replace(" UTC", ""),
      ]);
      tr.dataset.sessionId = session.session_id;
      tr.tabIndex = 0;
      tr.addEventListener("click", guarded(() => showSession(session.session_id)));
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter") guarded(() => showSession(session.session_id))();
      });
      body.appendChild(tr);
    }
    $("sessions-empty").hidden = body.rows.length > 0;
  }

  async function showSession(id) {
    if (!/^ps_[0-9a-f]{32}$/.test(id)) return;
    const session = await api("GET", `/sessions/${id}`);
    for (const tr of $("sessions").tBodies[0].rows) {
      tr.classList.toggle("selected", tr.dataset.sessionId === id);
    }
    $("session-box").hidden = false;
    $("session-box").dataset.sessionId = id;
    const folded = session.compacted_cells || 0;
    const compaction = folded
      ? `; cells 1-${folded} compacted into a base, lost: ${(session.lost || []).join(", ") || "nothing"}`
      : "";
    $("session-title").textContent =
      `Session ${id} (${session.status}, ${session.cells} cells${compaction})`;
    const cells = $("session-cells");
    cells.replaceChildren();
    (session.cell_executions || []).forEach((execution, at) => {
      const link = el("a", execution);
      link.href = `#${execution}`;
      const item = wrap("li", link);
      if (folded && at === 0) item.prepend(`base of cells 1-${folded}: `);
      cells.appendChild(item);
    });
    const names = $("session-names").tBodies[0];
    names.replaceChildren();
    for (const name of session.names || []) {
      names.appendChild(row([el("code", name.name), name.type, el("code", name.repr)]));
    }
    $("session-names-empty").hidden = names.rows.length > 0;
  }

  async function loadList(append) {
    const params = new URLSearchParams({ limit: "50" });
    const status = $("status-filter").value;
    if (status) params.set("status", status);
    if (append && nextCursor) params.set("cursor", nextCursor);
    const page = await api("GET", `/executions?${params}`);
    const body = $("executions").tBodies[0];
    if (!append) body.replaceChildren();
    for (const execution of page.executions) {
      const shortId = el("code", `${execution.execution_id.slice(0, 12)}…`);
      shortId.title = execution.execution_id;
      const tr = row([
        when(execution.started).replace(" UTC", ""),
        shortId,
        el("span", execution.status, `status ${execution.status}`),
        execution.round,
      ]);
      tr.dataset.executionId = execution.execution_id;
      tr.classList.toggle("selected", $("detail-pane").dataset.executionId === execution.execution_id);
      tr.tabIndex = 0;
      tr.addEventListener("click", () => openExecution(execution.execution_id));
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter") openExecution(execution.execution_id);
      });
      body.appendChild(tr);
    }
    nextCursor = page.next_cursor;
    $("more").hidden = !nextCursor;
    $("list-empty").hidden = body.rows.length > 0;
  }

  function openExecution(id) {
    if (location.hash !== `#${id}`) {
      location.hash = id;
    } else {
      showExecution(id).catch((error) => banner(error.message));
    }
  }

  async function showExecution(id) {
    if (!apiKey || !/^[0-9a-f]{32}$/.test(id)) return;
    const execution = await api("GET", `/executions/${id}`);
    render(execution);
  }

  function render(execution) {
    banner("");
    $("detail-pane").hidden = false;
    $("detail-pane").dataset.executionId = execution.execution_id;
    for (const tr of $("executions").tBodies[0].rows) {
      tr.classList.toggle("selected", tr.dataset.executionId === execution.execution_id);
    }
    $("detail-title").textContent = `Execution ${execution.execution_id}`;
    renderSummary(execution);
    const live = execution.status === "running" || execution.status === "paused";
    $("cancel").hidden = !live;
    $("error-box").hidden = !execution.error;
    $("error").textContent = execution.error || "";
    renderFrame(execution.frame);
    renderTimeline(execution.timeline || [], execution.timeline_omitted || 0, execution.status === "paused");
    $("stdout").textContent = execution.stdout || "";
    $("stderr").textContent = execution.stderr || "";
    $("stderr-box").hidden = !execution.stderr;
    renderFiles(execution.files || []);
  }

  function renderSummary(execution) {
    const facts = [
      ["Status", execution.status],
      ["Pauses", execution.round],
      ["Session", execution.session_id],
      ["Run time", execution.used_ms !== undefined ? `${execution.used_ms} ms of ${execution.timeout_ms} ms` : null],
      ["Kept until", when(execution.expires_at)],
    ];
    const list = $("summary");
    list.replaceChildren();
    for (const [name, value] of facts) {
      if (value === null || value === undefined || value === "") continue;
      list.appendChild(el("dt", name));
      const dd = el("dd", value);
      dd.dataset.fact = name;
      list.appendChild(dd);
    }
  }

  function renderFrame(frame) {
    $("frame-box").hidden = !frame;
    const body = $("locals").tBodies[0];
    body.replaceChildren();
    if (!frame) return;
    $("frame-where").textContent = `line ${frame.line}, in ${frame.function}`;
    for (const [name, value] of Object.entries(frame.locals || {})) {
      body.appendChild(row([el("code", name), el("code", JSON.stringify(value))]));
    }
  }

  function renderTimeline(calls, omitted, waiting) {
    const box = $("timeline");
    box.replaceChildren();
    $("timeline-empty").hidden = calls.length > 0;
    const rounds = new Map();
    for (const call of calls) {
      if (!rounds.has(call.round)) rounds.set(call.round, []);
      rounds.get(call.round).push(call);
    }
    for (const [round, roundCalls] of rounds) {
      const section = el("section", undefined, "round");
      section.dataset.round = round;
      section.appendChild(el("h4", `Round ${round}`));
      const table = el("table");
      table.appendChild(wrap("thead", row(["Call", "Tool", "Line", "Input", "Answer"])));
      const body = el("tbody");
      for (const call of roundCalls) {
        const unanswered = waiting ? "waiting for the client" : "never answered";
        const answer = call.state === "pending" ? unanswered : call.answer;
        const tr = row([
          el("code", call.id),
          el("code", call.name),
          call.line,
          el("pre", call.input),
          el("pre", answer, `answer ${call.state}`),
        ]);
        tr.dataset.callId = call.id;
        tr.dataset.state = call.state;
        body.appendChild(tr);
      }
      table.appendChild(body);
      section.appendChild(table);
      box.appendChild(section);
    }
    if (omitted > 0) box.appendChild(el("p", `${omitted} later calls not shown.`, "quiet"));
  }

  function renderFiles(files) {
    $("files-box").hidden = files.length === 0;
    const body = $("files").tBodies[0];
    body.replaceChildren();
    for (const file of files) body.appendChild(row([el("code", file.path), file.size]));
  }

  function guarded(action) {
    return (event) => {
      if (event) event.preventDefault();
      action().catch((error) => banner(error.message));
    };
  }

  $("key-form").addEventListener("submit", guarded(async () => {
    const typed = $("api-key").value.trim();
    if (!typed) {
      banner("Type an API key first.");
      return;
    }
    apiKey = typed;
    $("api-key").value = "";
    try {
      await loadList(false);
    } catch (error) {
      apiKey = null;
      connected(false);
      throw error;
    }
    banner("");
    connected(true);
    await loadSessions();
    if (location.hash.length > 1) await showExecution(location.hash.slice(1));
  }));

  $("forget").addEventListener("click", () => {
    apiKey = null;
    nextCursor = null;
    $("executions").tBodies[0].replaceChildren();
    $("sessions").tBodies[0].replaceChildren();
    connected(false);
    banner("");
  });

  $("status-filter").addEventListener("change", guarded(() => loadList(false)));
  $("refresh").addEventListener("click", guarded(() => loadList(false)));
  $("sessions-refresh").addEventListener("click", guarded(() => loadSessions()));
  $("more").addEventListener("click", guarded(() => loadList(true)));
  $("reload").addEventListener("click", guarded(() => showExecution($("detail-pane").dataset.executionId)));
  $("cancel").addEventListener("click", guarded(async () => {
    const id = $("detail-pane").dataset.executionId;
    render(await api("POST", `/executions/${id}/cancel`));
    await loadList(false);
  }));
  window.addEventListener("hashchange", guarded(() => showExecution(location.hash.slice(1))));
})();
