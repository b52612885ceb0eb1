// The operator console: plain JavaScript, no build step. Every read and every verb goes through
// the same HTTP API as any app, with the key the person entered (kept in this tab only). Text
// from calls is only ever set as textContent: a caller's words are never markup here.
"use strict";

const keyStore = window.sessionStorage;
let stopView = () => {};

function key() { return keyStore.getItem("switchboard.key") || ""; }
function me() { return keyStore.getItem("switchboard.me") || "console"; }

async function api(method, path, body) {
  const options = { method, headers: { Authorization: `Bearer ${key()}` } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const text = await response.text();
  let parsed = text;
  try { parsed = JSON.parse(text); } catch (_) { /* not JSON: kept as text */ }
  return { status: response.status, body: parsed };
}

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child ?? "")));
  }
  return node;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function describe(answer) {
  const error = answer.body && answer.body.error;
  if (error) return `${answer.status} ${error.code}: ${error.message}`;
  return `${answer.status} ${JSON.stringify(answer.body)}`;
}

function answerLine(target, answer) {
  target.className = "answer " + (answer.status < 300 ? "ok" : "refused");
  target.textContent = describe(answer);
}

// ── calls ──────────────────────────────────────────────────────────────────────────────

function viewCalls() {
  const status = el("select", { id: "filter-status" },
    ...["", "created", "admitting", "connected", "listening", "responding", "ended", "failed"]
      .map((value) => el("option", { value }, value || "any status")));
  const route = el("input", { id: "filter-route", placeholder: "route id" });
  const reason = el("input", { id: "filter-reason", placeholder: "end reason" });
  const counts = el("div", { class: "counts", id: "counts" });
  const rows = el("tbody", { id: "calls" });
  const table = el("table", {},
    el("thead", {}, el("tr", {}, ...["session", "status", "end", "by", "caller", "dialled", "tokens", "started"].map((h) => el("th", {}, h)))),
    rows);
  async function refresh() {
    const query = new URLSearchParams({ status: status.value, route: route.value, end_reason: reason.value, limit: "100" });
    const answer = await api("GET", `/v1/sessions?${query}`);
    if (answer.status !== 200) { counts.replaceChildren(el("span", { class: "refused" }, describe(answer))); return; }
    counts.replaceChildren(...Object.entries(answer.body.counts).map(([name, n]) => el("span", {}, `${name}: ${n}`)));
    rows.replaceChildren(...answer.body.sessions.map((s) => el("tr", { "data-session": s.id },
      el("td", {}, el("a", { href: `#/call/${s.id}` }, s.id)), el("td", {}, s.status), el("td", {}, s.end_reason || ""),
      el("td", {}, s.ended_by || ""), el("td", {}, s.caller || ""), el("td", {}, s.dialled || ""),
      el("td", {}, s.total_tokens), el("td", {}, s.created_at))));
  }
  for (const input of [status, route, reason]) input.addEventListener("change", refresh);
  show(el("h2", {}, "Calls"), el("div", { class: "controls" }, status, route, reason), counts, table);
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}

// ── one call ───────────────────────────────────────────────────────────────────────────

function viewCall(sessionId) {
  const state = el("div", { class: "panel", id: "call-state" }, "…");
  const transcript = el("div", { class: "panel transcript", id: "transcript" });
  const timeline = el("ol", { class: "panel timeline", id: "timeline" });
  const answer = el("div", { class: "answer", id: "verb-answer" });
  const words = el("input", { id: "verb-text", placeholder: "words to say or whisper", size: "40" });
  const target = el("input", { id: "verb-target", placeholder: "tel:+1… or sip:…" });
  const tools = el("div", { class: "panel", id: "tool-steps" });
  const incidents = el("div", { class: "panel", id: "incidents" });
  const events = el("tbody", { id: "events" });
  const live = {};
  const seen = new Set();

  const verb = (body) => async () => answerLine(answer, await api("POST", `/v1/sessions/${sessionId}/supervisor`, { by: { id: me(), name: me() }, verb: body() }));
  const line = (path) => async () => answerLine(answer, await api("POST", `/v1/sessions/${sessionId}/${path}`));
  const buttons = el("div", { class: "controls" },
    el("button", { id: "say", onclick: verb(() => ({ type: "say", text: words.value })) }, "Say"),
    el("button", { id: "whisper", onclick: verb(() => ({ type: "whisper", text: words.value })) }, "Whisper"),
    el("button", { id: "take-over", onclick: verb(() => ({ type: "take_over" })) }, "Take over"),
    el("button", { id: "release", onclick: verb(() => ({ type: "release" })) }, "Release"),
    el("button", { id: "hold", onclick: line("hold") }, "Hold"),
    el("button", { id: "unhold", onclick: line("unhold") }, "Unhold"),
    el("button", { id: "end", onclick: verb(() => ({ type: "end", reason: "ended from the console" })) }, "End"),
    el("button", { id: "transfer", onclick: verb(() => ({ type: "transfer", to: target.value })) }, "Transfer"));

  function addEntry(entry) {
    if (seen.has(entry.seq)) return;
    seen.add(entry.seq);
    const data = { ...entry.data };
    const latency = entry.kind === "turn.agent" && data.latency_ms != null ? ` (${data.latency_ms} ms)` : "";
    timeline.append(el("li", { "data-kind": entry.kind }, el("span", { class: "kind" }, entry.kind),
      `${entry.at.slice(11, 23)}${latency} `, JSON.stringify(data)));
  }

  function heard(message) {
    if (message.type === "transcript.delta" || message.type === "transcript.final") {
      let item = live[message.item_id];
      if (!item) {
        item = el("p", { class: message.role });
        live[message.item_id] = item;
        transcript.append(item);
      }
      item.textContent = message.type === "transcript.final" ? message.text : item.textContent + message.delta;
    } else if (message.type === "log.entry") {
      addEntry(message);
    } else if (message.type === "session.closed") {
      state.dataset.closed = "yes";
    }
  }

  async function refresh() {
    const record = await api("GET", `/v1/sessions/${sessionId}?events=1`);
    if (record.status !== 200) { state.textContent = describe(record); return; }
    const r = record.body;
    const holder = r.status === "ended" || r.status === "failed" ? `${r.end_reason} by ${r.ended_by}` : "";
    const held = r.line.taken_by ? `taken over by ${r.line.taken_by.name || r.line.taken_by.id}` : r.line.held ? "on hold" : "free";
    const waiting = r.line.attention ? ` · the caller waits for a person (${r.line.attention.reason})` : "";
    state.replaceChildren(el("span", { class: "state", id: "status" }, r.status), ` ${holder}`,
      el("div", { id: "line" }, `line: ${held}${waiting}`),
      el("div", {}, `usage: ${r.usage.total_tokens || 0} tokens in ${r.usage.responses || 0} responses`
        + (r.cost_usd != null ? ` · cost $${r.cost_usd.toFixed(4)}` : " · cost: no prices set")), r.why ? el("div", { class: "refused" }, `why: ${r.why.code}: ${r.why.summary}`) : "");
    tools.replaceChildren(el("h2", {}, "Tool steps"), ...r.tool_steps.map((t) => el("div", {}, `${t.tool} ${t.status} ${t.error ? (t.error.code || JSON.stringify(t.error)) : ""}`)));
    incidents.replaceChildren(el("h2", {}, "Incidents and compactions"),
      ...r.incidents.map((i) => el("div", { class: i.severity === "error" ? "refused" : "" }, `${i.code}: ${i.summary}`)),
      ...r.compactions.map((c) => el("div", {}, `compaction ${c.number}: ${c.status} ${c.reason || ""}`)));
    events.replaceChildren(...(r.log || []).slice(-200).map((e) => el("tr", {},
      el("td", {}, e.seq), el("td", {}, e.kind), el("td", {}, e.disposition),
      el("td", {}, (e.controls || []).map((c) => (c.control ? c.control.type : c.kind)).join(", ")))));
    const log = await api("GET", `/v1/sessions/${sessionId}/log`);
    if (log.status === 200) log.body.entries.forEach(addEntry);
  }

  let socket = null;
  (async () => {
    const token = await api("POST", `/v1/sessions/${sessionId}/live-token`);
    if (token.status !== 201) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}${token.body.path}`);
    socket.addEventListener("message", (event) => heard(JSON.parse(event.data)));
  })();

  show(el("h2", {}, `Call ${sessionId}`), state,
    el("div", { class: "panel" }, el("h2", {}, "Supervisor"), el("div", { class: "controls" }, words, target), buttons, answer),
    el("div", { class: "grid" }, el("div", {}, el("h2", {}, "Live transcript"), transcript), el("div", {}, el("h2", {}, "Call log"), timeline)),
    el("div", { class: "grid" }, tools, incidents),
    el("h2", {}, "Events, controls, dispositions"),
    el("table", {}, el("thead", {}, el("tr", {}, ...["seq", "event", "disposition", "controls"].map((h) => el("th", {}, h)))), events));
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => { clearInterval(timer); if (socket) socket.close(); };
}

// ── campaigns ──────────────────────────────────────────────────────────────────────────

function progress(campaign) {
  const states = campaign.counts.by_state;
  const done = states.done || 0;
  const total = campaign.contacts || 0;
  const bar = el("progress", { max: String(Math.max(total, 1)), value: String(done) });
  return el("span", {}, bar, ` ${done} / ${total} done, ${states.calling || 0} calling, ${states.waiting || 0} waiting`);
}

function outcomes(campaign) {
  return Object.entries(campaign.counts.by_outcome).map(([name, n]) => `${name} ${n}`).join(", ");
}

function viewCampaigns() {
  const rows = el("tbody", { id: "campaigns" });
  const answer = el("div", { class: "answer" });
  async function refresh() {
    const listed = await api("GET", "/v1/campaigns");
    if (listed.status !== 200) { answerLine(answer, listed); return; }
    rows.replaceChildren(...listed.body.campaigns.map((c) => el("tr", { "data-campaign": c.id },
      el("td", {}, el("a", { href: `#/campaign/${c.id}` }, c.name)), el("td", {}, c.status),
      el("td", {}, progress(c)), el("td", {}, outcomes(c)), el("td", {}, c.max_concurrent), el("td", {}, c.created_at))));
  }
  show(el("h2", {}, "Campaigns"), answer,
    el("table", {}, el("thead", {}, el("tr", {}, ...["campaign", "status", "progress", "outcomes", "at once", "created"].map((h) => el("th", {}, h)))), rows));
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}

function viewCampaign(campaignId) {
  const summary = el("div", { class: "panel", id: "campaign-summary" }, "…");
  const rows = el("tbody", { id: "contacts" });
  const answer = el("div", { class: "answer", id: "campaign-answer" });
  const act = (verb) => async () => { answerLine(answer, await api("POST", `/v1/campaigns/${campaignId}/${verb}`)); refresh(); };
  const buttons = el("div", { class: "controls" },
    el("button", { id: "pause", onclick: act("pause") }, "Pause"),
    el("button", { id: "resume", onclick: act("resume") }, "Resume"),
    el("button", { id: "cancel", onclick: act("cancel") }, "Cancel"));
  async function refresh() {
    const shown = await api("GET", `/v1/campaigns/${campaignId}`);
    if (shown.status !== 200) { answerLine(answer, shown); return; }
    const c = shown.body;
    summary.replaceChildren(el("div", {}, `${c.name}: ${c.status}`), el("div", {}, progress(c)), el("div", {}, outcomes(c)));
    const over = c.status === "completed" || c.status === "cancelled";
    for (const button of buttons.querySelectorAll("button")) button.disabled = over;
    const page = await api("GET", `/v1/campaigns/${campaignId}/contacts?limit=200`);
    if (page.status !== 200) return;
    rows.replaceChildren(...page.body.contacts.map((contact) => el("tr", {},
      el("td", {}, contact.to), el("td", {}, contact.state), el("td", {}, contact.outcome || ""),
      el("td", {}, contact.attempts.length),
      el("td", {}, ...contact.attempts.map((a) => el("div", {},
        el("a", { href: `#/call/${a.session_id}` }, a.outcome || "in progress"), ` ${a.started_at}`))))));
  }
  show(el("h2", {}, "Campaign"), summary, buttons, answer,
    el("table", {}, el("thead", {}, el("tr", {}, ...["to", "state", "outcome", "attempts", "calls"].map((h) => el("th", {}, h)))), rows));
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}

// ── dead letters ───────────────────────────────────────────────────────────────────────

function viewDeadLetters() {
  const rows = el("tbody", { id: "dead-letters" });
  const answer = el("div", { class: "answer" });
  const act = (method, path) => async () => { answerLine(answer, await api(method, path)); refresh(); };
  async function refresh() {
    const listed = await api("GET", "/v1/dead-letters");
    if (listed.status !== 200) { answerLine(answer, listed); return; }
    rows.replaceChildren(...listed.body.dead_letters.map((d) => el("tr", {},
      el("td", {}, d.id), el("td", {}, d.queue), el("td", {}, d.actor || "(corrupt)"), el("td", {}, d.session_id || ""),
      el("td", {}, d.age_s), el("td", {}, d.error),
      el("td", {}, el("button", { onclick: act("GET", `/v1/dead-letters/${d.id}`) }, "Show"),
        el("button", { onclick: act("POST", `/v1/dead-letters/${d.id}/replay`) }, "Replay"),
        el("button", { onclick: act("DELETE", `/v1/dead-letters/${d.id}`) }, "Purge")))));
  }
  show(el("h2", {}, "Dead letters"), answer,
    el("table", {}, el("thead", {}, el("tr", {}, ...["id", "queue", "actor", "session", "age s", "error", ""].map((h) => el("th", {}, h)))), rows));
  refresh();
  return () => {};
}

// ── routing ────────────────────────────────────────────────────────────────────────────

function route() {
  stopView();
  if (!key()) { show(el("p", { class: "hint" }, "Enter an API key to begin.")); stopView = () => {}; return; }
  const hash = location.hash || "#/calls";
  const call = hash.match(/^#\/call\/([A-Za-z0-9_-]{1,64})$/);
  const campaign = hash.match(/^#\/campaign\/([A-Za-z0-9_-]{1,64})$/);
  if (call) stopView = viewCall(call[1]);
  else if (campaign) stopView = viewCampaign(campaign[1]);
  else if (hash === "#/campaigns") stopView = viewCampaigns();
  else if (hash === "#/dead-letters") stopView = viewDeadLetters();
  else stopView = viewCalls();
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  keyStore.setItem("switchboard.key", document.getElementById("key").value.trim());
  const name = document.getElementById("me").value.trim();
  if (name) keyStore.setItem("switchboard.me", name);
  document.getElementById("key").value = "";
  route();
});
window.addEventListener("hashchange", route);
route();
