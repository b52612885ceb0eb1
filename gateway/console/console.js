// The supervisor's console: plain JavaScript, no build step. Every read and every verb goes
// through the same HTTP API as any app, with the key the person entered (kept in this tab only).
// Text from calls and from apps is only ever set as textContent (through el()): a caller's words
// are never markup here.
"use strict";

const keyStore = window.sessionStorage;
let stopView = () => {};
// Who the key is and what its role may do (GET /v1/me); null until it is known.
let who = null;
// Set once the API refused the key (revoked, or wrong): the page stops asking and says so.
let keyLost = false;

function key() { return keyStore.getItem("switchboard.key") || ""; }
function me() { return keyStore.getItem("switchboard.me") || "console"; }
function may(permission) { return !!(who && who.may && who.may[permission]); }

async function api(method, path, body) {
  if (keyLost) return { status: 401, body: { error: { code: "unauthorized", message: "this key no longer works" } } };
  const options = { method, headers: { Authorization: `Bearer ${key()}` } };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, options);
  } catch (_) {
    return { status: 0, body: { error: { code: "unreachable", message: "the gateway did not answer" } } };
  }
  const text = await response.text();
  let parsed = text;
  try { parsed = JSON.parse(text); } catch (_) { /* not JSON: kept as text */ }
  if (response.status === 401) loseKey();
  return { status: response.status, body: parsed };
}

// ── building the page (text only ever as text) ─────────────────────────────────────────────

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function show(...nodes) {
  document.getElementById("main").replaceChildren(...nodes);
}

function table(id, headings, rows, empty) {
  const body = el("tbody", { id }, ...rows);
  const wrapper = el("div", { class: "table" },
    el("table", {}, el("thead", {}, el("tr", {}, ...headings.map((h) => el("th", {}, h)))), body));
  if (empty && rows.length === 0) body.append(el("tr", { class: "empty" }, el("td", { colspan: String(headings.length) }, empty)));
  return wrapper;
}

// ── words for times, durations, money and states ───────────────────────────────────────────

// The API's times are RFC 3339 in UTC; shown in the reader's own locale and zone. Today's are
// shortened to the time of day; any other day's say which day (and year, when not this one), so
// a call of last week never reads as one of this morning.
function localTime(iso) {
  const at = iso ? new Date(iso) : null;
  if (!at || Number.isNaN(at.getTime())) return "";
  const now = new Date();
  const options = { hour: "2-digit", minute: "2-digit", second: "2-digit" };
  if (now.toDateString() !== at.toDateString()) {
    options.month = "short";
    options.day = "numeric";
    if (now.getFullYear() !== at.getFullYear()) options.year = "numeric";
  }
  return at.toLocaleString(undefined, options);
}

// A time as an element: shown as localTime shows it, the full date and time on hover.
function timeOf(iso) {
  const at = iso ? new Date(iso) : null;
  if (!at || Number.isNaN(at.getTime())) return "";
  return el("time", { datetime: iso, title: at.toLocaleString(undefined, { dateStyle: "full", timeStyle: "long" }) }, localTime(iso));
}

function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "—";
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return h ? `${h}:${String(m).padStart(2, "0")}:${rest}` : `${m}:${rest}`;
}

function since(iso) { return (Date.now() - new Date(iso).getTime()) / 1000; }

function money(usd) {
  if (usd === null || usd === undefined) return "—";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

function words(code) { return code ? String(code).replace(/[_.]/g, " ") : ""; }

const ACTIVITY_CLASS = {
  "agent speaking": "speaking", listening: "listening", "running a tool": "tool", held: "held",
  "taken over": "taken", "waiting for a person": "waiting", "collecting digits": "held",
  reconnecting: "trouble", connecting: "quiet", "not connected": "quiet", ended: "quiet",
};

function stateBadge(activity) {
  const what = activity ? activity.what : "";
  const text = what === "taken over" && activity.by ? `taken over by ${activity.by}` : what;
  return el("span", { class: `badge ${ACTIVITY_CLASS[what] || "quiet"}` }, text);
}

function outcomeText(session) {
  if (session.outcome === "not connected") return el("span", { class: "muted" }, "not connected");
  if (session.status === "failed") return el("span", { class: "bad" }, `failed: ${words(session.end_reason)}`);
  if (session.outcome) return words(session.outcome);
  if (session.status === "created" || session.status === "admitting") return el("span", { class: "muted" }, "not connected yet");
  return el("span", { class: "muted" }, "in progress");
}

// The campaign that placed a call, by its name (its id only when the name is not known), linked
// to its page; nothing for a call no campaign placed.
function campaignLink(id, name) {
  if (!id) return "";
  return el("a", { class: "campaign", href: `#/campaign/${id}` }, `campaign ${name || shortId(id)}`);
}

function directionText(direction) {
  return el("span", { class: `direction ${direction}`, title: direction }, direction === "outbound" ? "↗ out" : "↙ in");
}

// An API answer in words: what happened, or why it was refused.
function describe(answer, done) {
  const error = answer.body && answer.body.error;
  if (answer.status === 403) return "Your key may not do this.";
  if (error) return `Refused: ${error.message || words(error.code)}`;
  if (answer.status >= 300 || answer.status === 0) return `Refused (${answer.status}).`;
  return done || "Done.";
}

// What a campaign under way is doing ("waiting for its window", "calling" …), else its status.
function campaignState(c) {
  return c.activity || c.status;
}

function answerLine(target, answer, done) {
  target.className = "answer " + (answer.status >= 200 && answer.status < 300 ? "ok" : "refused");
  target.textContent = describe(answer, done);
  delete target.dataset.untilOver;
}

// ── the key ────────────────────────────────────────────────────────────────────────────────

function loseKey() {
  if (keyLost) return;
  keyLost = true;
  stopView();
  stopView = () => {};
  who = null;
  document.getElementById("whoami").textContent = "";
  show(el("div", { class: "banner trouble", id: "key-lost", role: "alert" },
    el("strong", {}, "This key no longer works. "),
    "It was revoked, or it is wrong: nothing on this page acts any more. Enter a key to go on."));
}

async function identify() {
  const answer = await api("GET", "/v1/me");
  if (answer.status !== 200) return false;
  who = answer.body;
  document.getElementById("whoami").textContent = `${who.name} · ${who.role}`;
  warnOfRetiringModels();
  return true;
}

// Models within this many days of their shutdown are named above every view (the API warns
// as long before: pipeline/model_catalog/choice.py).
const RETIRING_WITHIN_DAYS = 30;
// The catalog's models by id (GET /v1/models), once the key is known.
let models = new Map();

async function warnOfRetiringModels() {
  const answer = await api("GET", "/v1/models");
  if (answer.status !== 200) return;
  models = new Map(answer.body.models.map((model) => [model.id, model]));
  const today = new Date(new Date().toISOString().slice(0, 10));
  const notices = answer.body.models
    .filter((model) => model.shutdown_date)
    .map((model) => ({ model, days: Math.round((new Date(model.shutdown_date) - today) / 86400000) }))
    .filter(({ days }) => days <= RETIRING_WITHIN_DAYS)
    .map(({ model, days }) => el("div", { class: "banner held", role: "status", "data-model": model.id },
      el("strong", {}, `${model.id} `),
      days > 0 ? `shuts down on ${model.shutdown_date}, in ${days} days` : `was shut down on ${model.shutdown_date}`,
      model.replacement ? `: move what names it to ${model.replacement}.` : "."));
  document.getElementById("notices").replaceChildren(...notices);
}

function modelFact(r) {
  if (!r.model) return "";
  const known = models.get(r.model);
  const retiring = known && known.shutdown_date ? ` (shuts down ${known.shutdown_date})` : "";
  return el("span", {}, el("b", {}, "Model "), `${r.model}${r.voice ? ` · ${r.voice}` : ""}${retiring}`);
}

// ── the queue ──────────────────────────────────────────────────────────────────────────────

function viewQueue() {
  // Each cell names its column (data-label): on a phone a row is a card, its headings gone.
  const waiting = el("section", { id: "waiting", class: "panel queue" });
  const held = el("section", { id: "held", class: "panel queue" });
  const struggling = el("section", { id: "struggling", class: "panel queue" });
  const answer = el("div", { class: "answer", id: "queue-answer" });
  const caller = (entry) => {
    const link = el("a", { href: `#/call/${entry.session_id}` }, entry.caller || shortId(entry.session_id));
    return entry.campaign_id ? [link, " ", el("span", { class: "from" }, campaignLink(entry.campaign_id, entry.campaign_name))] : [link];
  };

  async function take(entry, button) {
    button.disabled = true;
    const taken = await api("POST", `/v1/sessions/${entry.session_id}/supervisor`, { by: { id: me(), name: me() }, verb: { type: "take_over" } });
    answerLine(answer, taken, "You have the line.");
    if (taken.status === 200) location.hash = `#/call/${entry.session_id}`;
    else button.disabled = false;
  }

  function takeButton(entry, acting) {
    // A Live model cannot be kept quiet while it hears the caller, so a person cannot take over
    // its line: the call is opened instead, where the line can be held and words said.
    if (entry.provider === "live") return el("button", { class: "primary take", "data-open": entry.session_id, onclick: () => { location.hash = `#/call/${entry.session_id}`; } }, "Open the call");
    if (!acting) return "";
    return el("button", { class: "primary take", "data-take": entry.session_id, onclick: (e) => take(entry, e.currentTarget) }, "Take the line");
  }

  function waitCell(entry) {
    const limit = entry.wait_limit_s || 0;
    const meter = el("meter", { min: "0", max: String(Math.max(limit, 1)), value: String(Math.min(entry.waited_s, limit || entry.waited_s)), low: String(limit * 0.5), high: String(limit * 0.8), optimum: "0" });
    return el("td", { class: "wait", "data-label": "waiting" }, el("strong", {}, duration(entry.waited_s)), ` of ${duration(limit)} `, meter);
  }

  async function refresh() {
    const queue = await api("GET", "/v1/queue");
    if (queue.status !== 200) { answerLine(answer, queue); return; }
    const q = queue.body;
    const acting = may("supervise");
    const waitingRows = q.waiting.map((entry) => el("tr", { "data-session": entry.session_id },
      el("td", { class: "caller" }, caller(entry), " ", directionText(entry.direction)),
      el("td", { class: "reason", "data-label": "why" }, entry.reason || ""),
      waitCell(entry),
      el("td", { "data-label": "in call" }, duration(entry.in_call_s)),
      el("td", { class: "act" }, takeButton(entry, acting))));
    const heldRows = q.held.map((entry) => el("tr", { "data-session": entry.session_id },
      el("td", { class: "caller" }, caller(entry)), el("td", { "data-label": "line" }, stateBadge(entry.activity)),
      el("td", { "data-label": "in call" }, duration(entry.in_call_s))));
    const strugglingRows = q.struggling.map((entry) => el("tr", { "data-session": entry.session_id },
      el("td", { class: "caller" }, caller(entry)), el("td", { class: "bad reason", "data-label": "what went wrong" }, entry.why.join("; ")),
      el("td", { "data-label": "lately" }, entry.troubles ? `${entry.troubles} in 5 min` : "—"), el("td", { "data-label": "line" }, stateBadge(entry.activity))));
    waiting.replaceChildren(el("h2", {}, "Waiting for a person ", el("span", { class: "count" }, String(q.waiting.length))),
      table("waiting-rows", ["caller", "why", "waiting", "in call", ""], waitingRows, "Nobody is waiting for a person."));
    held.replaceChildren(el("h2", {}, "On hold ", el("span", { class: "count" }, String(q.held.length))),
      table("held-rows", ["caller", "line", "in call"], heldRows, "No caller is on hold."));
    struggling.replaceChildren(el("h2", {}, "Struggling ", el("span", { class: "count" }, String(q.struggling.length))),
      table("struggling-rows", ["caller", "what went wrong", "lately", "line"], strugglingRows, "Every call's turns are going well."));
  }
  show(el("h1", {}, "Queue"), answer, waiting, el("div", { class: "columns" }, held, struggling));
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => clearInterval(timer);
}

function shortId(id) { return id ? `…${id.slice(-8)}` : ""; }

// ── calls ──────────────────────────────────────────────────────────────────────────────────

function viewCalls(agent = "") {
  const search = el("input", { id: "search", type: "search", placeholder: "Number, call id or words said", "aria-label": "Search" });
  const status = el("select", { id: "filter-status", "aria-label": "Status" },
    ...[["", "Any state"], ["live", "Live now"], ["ended", "Ended"], ["failed", "Failed"], ["not_connected", "Not connected"]]
      .map(([value, label]) => el("option", { value }, label)));
  const from = el("input", { id: "from", type: "datetime-local", "aria-label": "From" });
  const to = el("input", { id: "to", type: "datetime-local", "aria-label": "To" });
  const counts = el("div", { class: "counts", id: "counts" });
  const rows = el("tbody", { id: "calls" });
  const older = el("button", { id: "older" }, "Older →");
  const newer = el("button", { id: "newer" }, "← Newer");
  const pageNote = el("span", { class: "muted", id: "page-note" });
  // The cursors of the pages before this one (the first page has none).
  const cursors = [];
  let cursor = "";
  let nextCursor = null;
  const LIVE = ["connected", "listening", "responding"];

  async function refresh() {
    const query = new URLSearchParams({ limit: "25" });
    if (search.value.trim()) query.set("q", search.value.trim());
    if (status.value) query.set("status", status.value);
    if (from.value) query.set("created_after", new Date(from.value).toISOString());
    if (to.value) query.set("created_before", new Date(to.value).toISOString());
    if (cursor) query.set("cursor", cursor);
    if (agent) query.set("agent", agent);
    const answer = await api("GET", `/v1/sessions?${query}`);
    if (answer.status !== 200) { counts.replaceChildren(el("span", { class: "refused" }, describe(answer))); return; }
    // A session no call reached is "not connected", not a failure: the API counts it apart.
    const calls = answer.body.calls || { live: 0, over: 0, not_connected: 0 };
    counts.replaceChildren(el("span", { class: "chip live" }, `${calls.live} live`),
      el("span", { class: "chip", id: "count-over" }, `${calls.over} over`),
      el("span", { class: "chip", id: "count-not-connected" }, `${calls.not_connected} not connected`));
    const sessions = answer.body.sessions;
    nextCursor = answer.body.next;
    older.disabled = !nextCursor;
    newer.disabled = cursors.length === 0;
    pageNote.textContent = `page ${cursors.length + 1}`;
    rows.replaceChildren(...sessions.map(callRow));
    if (sessions.length === 0) rows.append(el("tr", { class: "empty" }, el("td", { colspan: "8" }, "No calls match.")));
  }

  function callRow(s) {
    const seconds = s.duration_s !== null && s.duration_s !== undefined ? s.duration_s : (LIVE.includes(s.status) ? since(s.created_at) : null);
    const number = s.direction === "outbound" ? s.dialled : s.caller;
    const web = s.provider === "live" ? "web (Live)" : "web";
    const where = s.campaign_id ? campaignLink(s.campaign_id, s.campaign_name) : (s.direction === "inbound" && s.dialled ? `line ${s.dialled}` : web);
    return el("tr", { "data-session": s.id, "data-status": s.status, class: LIVE.includes(s.status) ? "is-live" : "" },
      el("td", {}, el("a", { href: `#/call/${s.id}` }, timeOf(s.created_at))),
      el("td", { class: "num" }, duration(seconds)),
      el("td", {}, directionText(s.direction)),
      el("td", {}, where),
      el("td", {}, number || el("span", { class: "muted" }, shortId(s.id))),
      el("td", {}, stateBadge(s.activity)),
      el("td", {}, outcomeText(s)),
      el("td", { class: "num" }, money(s.cost_usd)));
  }

  function restart() { cursors.length = 0; cursor = ""; refresh(); }
  for (const input of [status, from, to]) input.addEventListener("change", restart);
  let typing = null;
  search.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(restart, 300); });
  older.addEventListener("click", () => { if (!nextCursor) return; cursors.push(cursor); cursor = nextCursor; refresh(); });
  newer.addEventListener("click", () => { cursor = cursors.pop() || ""; refresh(); });

  const heading = agent
    ? [el("h1", {}, `Calls of ${agent}`), el("p", { class: "crumbs" }, el("a", { href: `#/agent/${agent.split("@")[0]}` }, "← the agent"), " · ", el("a", { href: "#/calls" }, "every call"))]
    : [el("h1", {}, "Calls")];
  show(...heading, counts,
    el("div", { class: "filters" }, search, status, el("label", {}, "From ", from), el("label", {}, "To ", to)),
    el("div", { class: "table" }, el("table", { class: "calls" },
      el("thead", {}, el("tr", {}, ...["started", "length", "way", "route or campaign", "number", "state", "outcome", "cost"].map((h) => el("th", {}, h)))),
      rows)),
    el("div", { class: "pager" }, newer, pageNote, older));
  refresh();
  // Only the first page follows new calls: a later page stays as it was read.
  const timer = setInterval(() => { if (!cursor) refresh(); }, 3000);
  return () => clearInterval(timer);
}

// ── one call ───────────────────────────────────────────────────────────────────────────────

const WHO = { user: "Caller", assistant: "Agent" };
// Who asked for a person (the call log's attention.requested `by`): the app through the API, or
// the caller with a key their route maps to a person. An entry that does not say is nobody's.
const ASKED_BY = { app: "The app asked for a person", caller: "Caller asked for a person" };

// A line with no words in it: a response cut before its first word is stored with empty text.
function saidNothing(text) { return !text || !String(text).trim(); }

// Each call-log entry in words: [icon, tone, sentence].
function story(entry) {
  const d = entry.data || {};
  const person = (by) => (by && (by.name || by.id)) || "A supervisor";
  switch (entry.kind) {
    case "call.started": return ["☎", "info", d.caller ? `Call started from ${d.caller}` : "Call started"];
    case "turn.user": return ["❝", "caller", `Caller ${d.typed ? "typed" : "said"}: “${d.text || ""}”`];
    case "turn.agent": return ["❝", "agent", saidNothing(d.text)
      ? (d.interrupted ? "Agent was cut off before its first word" : "Agent said nothing")
      : `Agent said: “${d.text}”${d.interrupted ? " (cut off)" : ""}`];
    case "tool.call": return ["⚙", "tool", d.refused ? `Tool ${d.name} refused: ${words(d.refused)}` : `Agent ran the tool ${d.name}`];
    case "tool.result": return ["⚙", d.status === "succeeded" ? "tool" : "bad", `Tool ${words(d.status)}${d.elapsed_ms != null ? ` in ${Math.round(d.elapsed_ms)} ms` : ""}${d.error ? `: ${typeof d.error === "string" ? d.error : words(d.error.code || "error")}` : ""}`];
    case "prompt.changed": return ["✎", "info", `Instructions “${d.name}” ${d.changed ? "changed" : "set (unchanged)"}`];
    case "tools.changed": return ["⚙", "info", `Tools offered: ${(d.tools || []).join(", ") || "none"}`];
    case "call.line": return [d.held ? "‖" : "▶", "held", d.held ? "Line put on hold" : "Line given back"];
    case "attention.requested": return ["☝", "waiting", `${ASKED_BY[d.by] || "A person was asked for"}: ${d.reason || ""} (waits up to ${duration(d.wait_s)})`];
    case "attention.answered": return ["☝", d.ok ? "person" : "bad", d.ok ? `${person(d.by)} came to the caller` : `Nobody came: ${d.error || ""}`];
    case "supervisor.said": return ["☺", "person", `${person(d.by)} said: “${d.text || ""}”`];
    case "supervisor.whispered": return ["☺", "person", `${person(d.by)} whispered to the agent: “${d.text || ""}”`];
    case "supervisor.took_over": return ["☺", "person", `${person(d.by)} took over the line`];
    case "supervisor.released": return ["☺", "person", `${person(d.by)} gave the line back to the agent`];
    case "supervisor.ended": return ["■", "person", `${person(d.by)} ended the call`];
    case "supervisor.transferred": return ["↪", "person", `${person(d.by)} transferred the call to ${d.to || ""}`];
    case "call.transferred": return ["↪", d.ok ? "info" : "bad", d.ok ? `Transferred to ${d.to}` : `Transfer to ${d.to} failed: ${d.error || ""}`];
    case "call.key": return ["⌨", "info", `Caller pressed ${d.key}`];
    case "consent.declined": return ["⊘", "bad", `Caller declined recording (by ${d.by})`];
    case "call.silence": return ["…", "quiet", `Caller silent (${d.count})`];
    case "error": return ["⚠", "bad", `Error: ${d.message || words(d.code)}`];
    case "call.ended": return ["■", "quiet", `Call ended: ${words(d.reason)}${d.ended_by ? ` (by ${d.ended_by})` : ""} after ${duration(d.duration_s)}`];
    default: return ["•", "quiet", words(entry.kind)];
  }
}

// A caller who waits longer than this for an answer hears a slow agent (pipeline/records/desk.py's
// SLOW_ANSWER_MS: the queue's "slow answers" and the heard-latency alert).
const SLOW_ANSWER_MS = 1500;

function latencyChart(turns) {
  // Each agent turn's heard latency (end of the caller's speech to the answer's first audio),
  // when the call log has it; a turn without a measure draws no bar.
  const measured = turns.filter((t) => typeof t.heard_ms === "number");
  if (measured.length === 0) return el("p", { class: "muted", id: "latency-none" }, "Heard latency: — (no turn measured yet)");
  // The scale leaves room above the slow line (1.5 s, the alert's and the queue's threshold).
  const top = Math.max(SLOW_ANSWER_MS * 1.25, ...measured.map((t) => t.heard_ms));
  const width = 300, height = 64, gap = 2, label = 34;
  const bar = Math.max(3, Math.min(24, (width - label - gap * turns.length) / turns.length));
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height + 12}`, preserveAspectRatio: "xMinYMid meet", class: "latency", role: "img", "aria-label": "heard latency per turn" });
  const slowY = height - (SLOW_ANSWER_MS / top) * height;
  chart.append(svg("line", { x1: 0, x2: width - label, y1: slowY, y2: slowY, class: "slow-line" }),
    svg("text", { x: width - label + 3, y: slowY + 3, class: "slow-label" }, `${SLOW_ANSWER_MS / 1000} s`));
  turns.forEach((t, i) => {
    if (typeof t.heard_ms !== "number") return;
    const h = Math.max(2, (t.heard_ms / top) * height);
    const tone = t.heard_ms > SLOW_ANSWER_MS ? "slow" : t.heard_ms > 800 ? "fair" : "fast";
    chart.append(svg("rect", { x: i * (bar + gap), y: height - h, width: bar, height: h, class: tone, "data-ms": t.heard_ms }, svg("title", {}, `turn ${i + 1}: ${t.heard_ms} ms`)));
  });
  chart.append(svg("line", { x1: 0, x2: width - label, y1: height, y2: height, class: "axis" }));
  const ms = measured.map((t) => t.heard_ms).sort((a, b) => a - b);
  // The nearest-rank percentile, as the session record's heard_latency counts it: a measured value.
  const p = (q) => ms[Math.max(Math.ceil(q * ms.length), 1) - 1];
  return el("div", { id: "latency" }, chart, el("div", { class: "muted", id: "latency-summary" }, `Heard latency: p50 ${p(0.5)} ms · p95 ${p(0.95)} ms over ${ms.length} turn${ms.length === 1 ? "" : "s"}`));
}

function viewCall(sessionId) {
  const title = el("h1", { id: "call-title" }, `Call ${shortId(sessionId)}`);
  const facts = el("div", { class: "facts", id: "call-facts" });
  const banner = el("div", { class: "banner quiet", id: "line", role: "status" }, "…");
  const transcript = el("div", { class: "transcript", id: "transcript" });
  const timeline = el("ol", { class: "timeline", id: "timeline" });
  const chart = el("div", { id: "latency-chart" });
  const answer = el("div", { class: "answer", id: "verb-answer", role: "status" });
  const text = el("input", { id: "verb-text", placeholder: "Words to say to the caller or whisper to the agent", "aria-label": "Words" });
  const target = el("input", { id: "verb-target", placeholder: "tel:+1… or sip:…", "aria-label": "Transfer to" });
  const confirmBox = el("div", { class: "confirm", id: "confirm", hidden: true });
  const takeOverWhy = el("p", { class: "muted why", id: "take-over-why", hidden: true });
  const engineer = el("details", { id: "engineer" }, el("summary", {}, "Engineer's view: events, controls, dispositions, tool steps, incidents"));
  const engineerBody = el("div", {});
  engineer.append(engineerBody);
  // The conversation: what the record holds (every final line), then what is being said now.
  const stored = new Map();
  const speaking = new Map();
  const seen = new Set();
  const turns = [];
  let record = null;
  let caller = "";
  let logAfter = 0;
  let closed = false;

  // `done` says what an accepted verb does; one that ends the call ("The call is ending.") says
  // so only until the call is over, and then that it is.
  const supervise = (verb, done, endsTheCall = false) => async () => {
    const sent = await api("POST", `/v1/sessions/${sessionId}/supervisor`, { by: { id: me(), name: me() }, verb: verb() });
    answerLine(answer, sent, done);
    if (endsTheCall && sent.status >= 200 && sent.status < 300) answer.dataset.untilOver = "yes";
    refresh();
  };
  const line = (path, done) => async () => { answerLine(answer, await api("POST", `/v1/sessions/${sessionId}/${path}`), done); refresh(); };
  function confirmed(question, yes, act) {
    return () => {
      confirmBox.replaceChildren(el("span", {}, question),
        el("button", { class: "danger", id: "confirm-yes", onclick: () => { confirmBox.hidden = true; act(); } }, yes),
        el("button", { id: "confirm-no", onclick: () => { confirmBox.hidden = true; } }, "Keep the call"));
      confirmBox.hidden = false;
    };
  }
  const buttons = {
    say: el("button", { id: "say", onclick: supervise(() => ({ type: "say", text: text.value }), "The agent says your words.") }, "Say to caller"),
    whisper: el("button", { id: "whisper", onclick: supervise(() => ({ type: "whisper", text: text.value }), "Whispered to the agent.") }, "Whisper to agent"),
    takeOver: el("button", { id: "take-over", class: "primary", onclick: supervise(() => ({ type: "take_over" }), "You have the line.") }, "Take over"),
    release: el("button", { id: "release", onclick: supervise(() => ({ type: "release" }), "The line is the agent's again.") }, "Give back"),
    hold: el("button", { id: "hold", onclick: line("hold", "The caller is on hold.") }, "Hold"),
    unhold: el("button", { id: "unhold", onclick: line("unhold", "The caller is off hold.") }, "Unhold"),
    transfer: el("button", { id: "transfer" }, "Transfer…"),
    end: el("button", { id: "end", class: "danger" }, "End call…"),
  };
  buttons.transfer.addEventListener("click", confirmed("Transfer this call? The agent leaves the call.", "Transfer now",
    supervise(() => ({ type: "transfer", to: target.value }), "The call is being transferred.", true)));
  buttons.end.addEventListener("click", confirmed("End this call now? The caller is cut off.", "End the call",
    supervise(() => ({ type: "end", reason: "ended from the console" }), "The call is ending.", true)));

  // Why each action is not offered now, or null when it is: none once the call is over or before
  // it is connected, none the key may not do, and none the call's provider cannot do (the API's
  // own refusal, from the record's `not_supported`).
  function whyNot(r) {
    const over = closed || r.status === "ended" || r.status === "failed";
    const connected = ["connected", "listening", "responding"].includes(r.status);
    const call = over ? "The call is over." : connected ? null : "The call is not connected yet.";
    const supervisor = may("supervise") ? null : "Your key may not do this.";
    const line = may("line") ? null : "Your key may not do this.";
    const holder = r.line.taken_by ? (r.line.taken_by.name || r.line.taken_by.id) : null;
    const lacking = (r.not_supported || {}).take_over;
    return {
      say: call || supervisor, whisper: call || supervisor,
      takeOver: call || (lacking && lacking.message) || (holder && `${holder} holds the line.`) || supervisor,
      release: call || (holder ? null : "Nobody holds the line.") || supervisor,
      hold: call || (r.line.held ? "The line is on hold." : null) || line,
      unhold: call || (r.line.held ? null : "The line is not on hold.") || line,
      transfer: call || supervisor, end: call || supervisor,
    };
  }

  // What the provider can never do is said in the page, not only on hover: the button points here.
  function drawTakeOverWhy(r) {
    const lacking = (r.not_supported || {}).take_over;
    takeOverWhy.hidden = !lacking;
    takeOverWhy.textContent = lacking ? `Take over is not offered on this call: ${lacking.message}.` : "";
    if (lacking) buttons.takeOver.setAttribute("aria-describedby", "take-over-why");
    else buttons.takeOver.removeAttribute("aria-describedby");
  }

  function drawTranscript() {
    const lines = [...stored.values()];
    for (const [itemId, live] of speaking) if (!stored.has(itemId)) lines.push(live);
    const bubbles = [];
    for (const item of lines) {
      // A response cut before its first word (a greeting the caller spoke over at once) is kept
      // with no text: it said nothing, so it draws no bubble.
      if (saidNothing(item.text)) continue;
      const last = bubbles[bubbles.length - 1];
      if (last && last.role === item.role && item.joins) { last.text += ` ${item.text}`; continue; }
      bubbles.push({ role: item.role, text: item.text, live: item.live });
    }
    transcript.replaceChildren(...bubbles.map((b) => el("div", { class: `msg ${b.role === "user" ? "user" : "assistant"}${b.live ? " live" : ""}` },
      el("span", { class: "who" }, WHO[b.role] || b.role), el("p", {}, b.text))));
    if (bubbles.length === 0) transcript.append(el("p", { class: "muted" }, closed ? "Nothing was said." : "Nothing said yet."));
    transcript.scrollTop = transcript.scrollHeight;
  }

  function addEntry(entry) {
    if (seen.has(entry.seq)) return;
    seen.add(entry.seq);
    logAfter = Math.max(logAfter, entry.seq);
    const [icon, tone, sentence] = story(entry);
    const latency = entry.kind === "turn.agent" && typeof (entry.data || {}).heard_ms === "number" ? el("span", { class: "ms" }, `heard in ${entry.data.heard_ms} ms`) : "";
    timeline.append(el("li", { "data-kind": entry.kind, class: tone },
      el("span", { class: "icon", "aria-hidden": "true" }, icon),
      timeOf(entry.at), " ", el("span", { class: "what" }, sentence), " ", latency));
    timeline.scrollTop = timeline.scrollHeight;
    if (entry.kind === "turn.agent") { turns.push({ heard_ms: (entry.data || {}).heard_ms }); chart.replaceChildren(latencyChart(turns)); }
    if (entry.kind === "call.ended") closed = true;
    if (entry.kind === "call.started" && (entry.data || {}).caller) {
      caller = entry.data.caller;
      title.textContent = `Call from ${caller}`;
    }
  }

  function heard(message) {
    if (message.type === "transcript.delta" || message.type === "transcript.final") {
      const now = speaking.get(message.item_id) || { role: message.role, text: "", live: true, joins: !!record && record.provider === "live" };
      now.text = message.type === "transcript.final" ? message.text : now.text + message.delta;
      speaking.set(message.item_id, now);
      drawTranscript();
    } else if (message.type === "log.entry") {
      addEntry(message);
    } else if (message.type === "session.closed") {
      closed = true;
      refresh();
    }
  }

  function drawBanner(r) {
    const ended = r.status === "ended" || r.status === "failed";
    let tone = "listening", textNow;
    if (ended) {
      tone = "quiet";
      const reason = words(r.end_reason);
      const by = r.ended_by && !reason.startsWith(r.ended_by) ? ` (ended by the ${r.ended_by})` : "";
      textNow = r.status === "failed" && !r.provider_call_id ? "Not connected: no call reached this session." : `Call over: ${reason}${by}.`;
    } else if (r.status === "created" || r.status === "admitting") {
      tone = "quiet"; textNow = "Not connected yet.";
    } else if (r.line.taken_by) {
      tone = "taken"; textNow = `${r.line.taken_by.name || r.line.taken_by.id} holds the line: the agent is silent.`;
    } else if (r.line.attention) {
      tone = "waiting"; textNow = `The caller waits for a person: ${r.line.attention.reason} (up to ${duration(r.line.attention.wait_s)}).`;
    } else if (r.line.held) {
      tone = "held"; textNow = "On hold: the agent neither speaks nor hears.";
    } else if (r.line.collecting) {
      tone = "held"; textNow = "The caller is keying in digits.";
    } else {
      textNow = r.status === "responding" ? "The agent has the line and is speaking." : "The agent has the line and is listening.";
      tone = r.status === "responding" ? "speaking" : "listening";
    }
    banner.className = `banner ${tone}`;
    banner.dataset.state = tone;
    banner.textContent = textNow;
  }

  function drawFacts(r) {
    const phone = (r.outbound && r.outbound.to) || "";
    title.textContent = phone ? `Call to ${phone}` : (caller ? `Call from ${caller}` : `Call ${shortId(r.id)}`);
    const length = r.ended_at ? (new Date(r.ended_at) - new Date(r.created_at)) / 1000 : since(r.created_at);
    facts.replaceChildren(
      el("span", {}, el("b", {}, "Started "), timeOf(r.created_at)), el("span", {}, el("b", {}, "Length "), duration(length)),
      el("span", {}, el("b", {}, "Way "), r.outbound ? "outbound" : "inbound"),
      r.outbound && r.outbound.campaign_id ? el("span", { id: "call-campaign" }, el("b", {}, "From "), campaignLink(r.outbound.campaign_id, r.outbound.campaign_name)) : "",
      el("span", {}, el("b", {}, "Provider "), r.provider === "live" ? "Live" : "Realtime"),
      modelFact(r),
      el("span", {}, el("b", {}, "Cost "), money(r.cost_usd)),
      r.heard_latency && r.heard_latency.p50_ms != null ? el("span", {}, el("b", {}, "Heard "), `p50 ${r.heard_latency.p50_ms} ms · p95 ${r.heard_latency.p95_ms} ms`) : "",
      el("span", { class: "muted" }, r.id));
  }

  function drawEngineer(r) {
    const tools = r.tool_steps.map((t) => el("tr", {}, el("td", {}, t.tool), el("td", {}, t.status), el("td", {}, t.elapsed_ms != null ? `${Math.round(t.elapsed_ms)} ms` : ""), el("td", {}, t.error ? (t.error.code || JSON.stringify(t.error)) : "")));
    const incidents = r.incidents.map((i) => el("tr", { class: i.severity === "error" ? "bad" : "" }, el("td", {}, timeOf(i.at)), el("td", {}, i.code), el("td", {}, i.summary)));
    const events = (r.log || []).slice(-200).map((e) => el("tr", {},
      el("td", {}, e.seq ?? ""), el("td", {}, e.kind), el("td", {}, e.disposition),
      el("td", {}, (e.controls || []).map((c) => (c.control ? c.control.type : c.kind)).join(", "))));
    engineerBody.replaceChildren(
      el("p", {}, `usage: ${r.usage.total_tokens || 0} tokens in ${r.usage.responses || 0} responses · applied seq ${r.applied_seq} of ${r.logged_seq} · gateway ${r.owning_gateway}`),
      r.why ? el("p", { class: "bad" }, `why it failed: ${r.why.code}: ${r.why.summary || ""}`) : "",
      el("h3", {}, "Tool steps"), table("tool-steps", ["tool", "status", "took", "error"], tools, "none"),
      el("h3", {}, "Incidents and compactions"), table("incidents", ["at", "code", "summary"], incidents, "none"),
      ...r.compactions.map((c) => el("div", {}, `compaction ${c.number}: ${c.status} ${c.reason || ""}`)),
      el("h3", {}, "Events, controls, dispositions"), table("events", ["seq", "event", "disposition", "controls"], events));
  }

  async function refresh() {
    const answerNow = await api("GET", `/v1/sessions/${sessionId}${engineer.open ? "?events=1" : ""}`);
    if (answerNow.status !== 200) { banner.className = "banner trouble"; banner.textContent = describe(answerNow); return; }
    record = answerNow.body;
    if (record.status === "ended" || record.status === "failed") closed = true;
    for (const item of record.transcript || []) {
      if (item.late) continue;
      stored.set(item.item_id, { role: item.role, text: item.text, joins: record.provider === "live" });
    }
    drawTranscript();
    drawBanner(record);
    drawFacts(record);
    const why = whyNot(record);
    for (const [name, button] of Object.entries(buttons)) {
      button.disabled = !!why[name];
      if (why[name]) button.title = why[name];
      else button.removeAttribute("title");
    }
    drawTakeOverWhy(record);
    if (closed) confirmBox.hidden = true;
    if (closed && answer.dataset.untilOver) {
      answer.textContent = "The call has ended.";
      delete answer.dataset.untilOver;
    }
    if (engineer.open) drawEngineer(record);
    const log = await api("GET", `/v1/sessions/${sessionId}/log?after=${logAfter}`);
    if (log.status === 200) log.body.entries.forEach(addEntry);
  }
  engineer.addEventListener("toggle", () => { if (engineer.open) refresh(); });

  let socket = null;
  let stopped = false;
  (async () => {
    const token = await api("POST", `/v1/sessions/${sessionId}/live-token`);
    if (token.status !== 201 || stopped) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}${token.body.path}`);
    socket.addEventListener("message", (event) => heard(JSON.parse(event.data)));
  })();

  const acting = may("supervise") || may("line");
  const actions = acting ? el("section", { class: "panel actions", id: "actions" },
    el("h2", {}, "Act on the call"),
    el("div", { class: "controls" }, buttons.takeOver, buttons.release, buttons.hold, buttons.unhold),
    takeOverWhy,
    may("supervise") ? el("div", { class: "controls" }, text, buttons.say, buttons.whisper) : "",
    may("supervise") ? el("div", { class: "controls" }, target, buttons.transfer, buttons.end) : "",
    confirmBox, answer) : el("p", { class: "muted", id: "read-only" }, "Your key may watch this call but not act on it.");
  for (const button of Object.values(buttons)) button.disabled = true;

  show(el("p", { class: "crumbs" }, el("a", { href: "#/calls" }, "← Calls"), " · ", el("a", { href: "#/queue" }, "Queue")),
    title, facts, banner,
    el("div", { class: "call" },
      el("section", { class: "panel" }, el("h2", {}, "Conversation"), transcript),
      el("div", { class: "side" }, actions,
        el("section", { class: "panel" }, el("h2", {}, "What happened"), chart, timeline))),
    engineer);
  chart.replaceChildren(latencyChart(turns));
  refresh();
  const timer = setInterval(refresh, 2000);
  return () => { stopped = true; clearInterval(timer); if (socket) socket.close(); };
}

// ── campaigns ──────────────────────────────────────────────────────────────────────────────

function progress(campaign) {
  const states = campaign.counts.by_state;
  const done = states.done || 0;
  const total = campaign.contacts || 0;
  const bar = el("progress", { max: String(Math.max(total, 1)), value: String(done) });
  return el("span", {}, bar, ` ${done} / ${total} done, ${states.calling || 0} calling, ${states.waiting || 0} waiting`);
}

function outcomes(campaign) {
  return Object.entries(campaign.counts.by_outcome).map(([name, n]) => `${words(name)} ${n}`).join(", ");
}

// ── agents ─────────────────────────────────────────────────────────────────────────────────

function viewAgents() {
  const rows = el("tbody", { id: "agents" });
  const answer = el("div", { class: "answer" });
  async function refresh() {
    const listed = await api("GET", "/v1/agents");
    if (listed.status !== 200) { answerLine(answer, listed); return; }
    rows.replaceChildren(...listed.body.agents.map((a) => el("tr", { "data-agent": a.name },
      el("td", {}, el("a", { href: `#/agent/${a.name}` }, a.name)),
      el("td", {}, a.published_version ? `version ${a.published_version}` : el("span", { class: "muted" }, "none published")),
      el("td", { class: "num" }, a.versions),
      el("td", {}, a.archived_at ? `archived ${timeOf(a.archived_at)}` : ""),
      el("td", {}, timeOf(a.created_at)))));
    if (listed.body.agents.length === 0) rows.append(el("tr", { class: "empty" }, el("td", { colspan: "5" }, "No agents yet.")));
  }
  show(el("h1", {}, "Agents"), answer,
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["agent", "published", "versions", "", "created"].map((h) => el("th", {}, h)))), rows)));
  refresh();
  const timer = setInterval(refresh, 5000);
  return () => clearInterval(timer);
}

// A value of a version's spec as text (JSON for what is not a string; never markup).
function specText(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function viewAgent(name) {
  const heading = el("h1", { id: "agent-title" }, `Agent ${name}`);
  const versions = el("tbody", { id: "versions" });
  const publications = el("tbody", { id: "publications" });
  const answer = el("div", { class: "answer", id: "agent-answer" });
  const before = el("select", { id: "diff-from", "aria-label": "From version" });
  const after = el("select", { id: "diff-to", "aria-label": "To version" });
  const changes = el("tbody", { id: "changes" });
  const compare = el("button", { id: "compare" }, "Compare");
  let known = [];

  async function refresh() {
    const shown = await api("GET", `/v1/agents/${name}`);
    if (shown.status !== 200) { answerLine(answer, shown); return; }
    const agent = shown.body.agent;
    heading.textContent = `Agent ${agent.name}${agent.archived_at ? " (archived)" : ""}`;
    versions.replaceChildren(...agent.versions.map((v) => el("tr", { "data-version": v.version, "data-status": v.status },
      el("td", { class: "num" }, v.version), el("td", {}, v.status), el("td", {}, timeOf(v.created_at)), el("td", {}, v.created_by),
      el("td", { class: "num" }, el("a", { href: `#/calls?agent=${agent.name}@${v.version}` }, `${v.calls} call${v.calls === 1 ? "" : "s"}`)),
      el("td", { class: "num" }, v.live_calls ? `${v.live_calls} live` : ""))));
    publications.replaceChildren(...agent.publications.map((p) => el("tr", {},
      el("td", { class: "num" }, p.version), el("td", {}, timeOf(p.published_at)), el("td", {}, p.published_by))));
    const numbers = agent.versions.map((v) => v.version);
    if (numbers.join() !== known.join()) {
      known = numbers;
      const options = () => numbers.map((n) => el("option", { value: n }, `version ${n}`));
      before.replaceChildren(...options());
      after.replaceChildren(...options());
      if (numbers.length > 1) { before.value = numbers[numbers.length - 2]; after.value = numbers[numbers.length - 1]; }
    }
  }

  compare.addEventListener("click", async () => {
    const found = await api("GET", `/v1/agents/${name}/diff?from=${before.value}&to=${after.value}`);
    if (found.status !== 200) { answerLine(answer, found); return; }
    changes.replaceChildren(...found.body.changes.map((c) => el("tr", {},
      el("td", {}, c.path), el("td", { class: "was" }, specText(c.from)), el("td", { class: "now" }, specText(c.to)))));
    if (found.body.changes.length === 0) changes.append(el("tr", { class: "empty" }, el("td", { colspan: "3" }, "The two versions are the same.")));
  });

  show(el("p", { class: "crumbs" }, el("a", { href: "#/agents" }, "← Agents")), heading, answer,
    el("h2", {}, "Versions"),
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["version", "status", "made", "by", "calls", ""].map((h) => el("th", {}, h)))), versions)),
    el("h2", {}, "Published"),
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["version", "when", "by"].map((h) => el("th", {}, h)))), publications)),
    el("h2", {}, "What changed"),
    el("div", { class: "filters" }, before, after, compare),
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["field", "before", "after"].map((h) => el("th", {}, h)))), changes)));
  refresh();
  const timer = setInterval(refresh, 5000);
  return () => clearInterval(timer);
}

function viewCampaigns() {
  const rows = el("tbody", { id: "campaigns" });
  const answer = el("div", { class: "answer" });
  async function refresh() {
    const listed = await api("GET", "/v1/campaigns");
    if (listed.status !== 200) { answerLine(answer, listed); return; }
    rows.replaceChildren(...listed.body.campaigns.map((c) => el("tr", { "data-campaign": c.id },
      el("td", {}, el("a", { href: `#/campaign/${c.id}` }, c.name)), el("td", {}, campaignState(c)),
      el("td", {}, progress(c)), el("td", {}, outcomes(c)), el("td", {}, c.max_concurrent), el("td", {}, timeOf(c.created_at)))));
  }
  show(el("h1", {}, "Campaigns"), answer,
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["campaign", "status", "progress", "outcomes", "at once", "created"].map((h) => el("th", {}, h)))), rows)));
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}

function viewCampaign(campaignId) {
  const heading = el("h1", { id: "campaign-title" }, "Campaign");
  const summary = el("div", { class: "panel", id: "campaign-summary" }, "…");
  const rows = el("tbody", { id: "contacts" });
  const answer = el("div", { class: "answer", id: "campaign-answer" });
  const confirmBox = el("div", { class: "confirm", id: "campaign-confirm", hidden: true });
  let campaign = null;
  const act = (verb, done) => async () => { answerLine(answer, await api("POST", `/v1/campaigns/${campaignId}/${verb}`), done); refresh(); };
  const pause = el("button", { id: "pause", onclick: act("pause", "Paused: nobody new is called; calls in progress finish.") }, "Pause");
  const resume = el("button", { id: "resume", onclick: act("resume", "Calling again.") }, "Resume");
  const cancel = el("button", { id: "cancel", class: "danger" }, "Cancel…");
  // A cancel cannot be undone (every contact still waiting ends `cancelled`): it is asked first.
  cancel.addEventListener("click", () => {
    const waiting = campaign ? campaign.counts.by_state.waiting || 0 : 0;
    const name = campaign ? `“${campaign.name}”` : "this campaign";
    const left = waiting ? `The ${waiting} contact${waiting === 1 ? "" : "s"} still waiting will not be called` : "Nobody is left waiting to be called";
    confirmBox.replaceChildren(
      el("span", {}, `Cancel ${name}? ${left}, and a cancelled campaign cannot be resumed. Calls in progress finish.`),
      el("button", { class: "danger", id: "cancel-yes", onclick: () => { confirmBox.hidden = true; act("cancel", "Cancelled: nobody else is called.")(); } }, "Cancel the campaign"),
      el("button", { id: "cancel-no", onclick: () => { confirmBox.hidden = true; } }, "Keep it"));
    confirmBox.hidden = false;
  });
  const buttons = el("div", { class: "controls" }, pause, resume, cancel);

  // Why each verb is not offered now (null: it is), shown on the disabled button.
  function whyNot(c) {
    const over = c.status === "completed" || c.status === "cancelled" ? `The campaign is ${c.status}.` : null;
    return {
      pause: over || (c.status === "paused" ? "The campaign is paused." : null),
      resume: over || (c.status === "paused" ? null : "The campaign is not paused."),
      cancel: over,
    };
  }

  async function refresh() {
    const shown = await api("GET", `/v1/campaigns/${campaignId}`);
    if (shown.status !== 200) { answerLine(answer, shown); return; }
    const c = shown.body;
    campaign = c;
    heading.textContent = c.name;
    summary.replaceChildren(el("div", {}, el("b", {}, "Status "), campaignState(c)), el("div", {}, progress(c)), el("div", {}, outcomes(c)));
    const why = whyNot(c);
    for (const [name, button] of [["pause", pause], ["resume", resume], ["cancel", cancel]]) {
      button.disabled = !!why[name];
      if (why[name]) button.title = why[name];
      else button.removeAttribute("title");
    }
    if (why.cancel) confirmBox.hidden = true;
    const page = await api("GET", `/v1/campaigns/${campaignId}/contacts?limit=200`);
    if (page.status !== 200) return;
    rows.replaceChildren(...page.body.contacts.map((contact) => el("tr", {},
      el("td", {}, contact.to), el("td", {}, contact.state), el("td", {}, words(contact.outcome)),
      el("td", {}, contact.attempts.length),
      el("td", {}, ...contact.attempts.map((a) => el("div", {},
        el("a", { href: `#/call/${a.session_id}` }, words(a.outcome) || "in progress"), " ", timeOf(a.started_at)))))));
  }
  show(el("p", { class: "crumbs" }, el("a", { href: "#/campaigns" }, "← Campaigns")), heading, summary,
    may("steer") ? buttons : "", may("steer") ? confirmBox : "", answer,
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["to", "state", "outcome", "attempts", "calls"].map((h) => el("th", {}, h)))), rows)));
  refresh();
  const timer = setInterval(refresh, 3000);
  return () => clearInterval(timer);
}

// ── dead letters ───────────────────────────────────────────────────────────────────────────

function viewDeadLetters() {
  const rows = el("tbody", { id: "dead-letters" });
  const answer = el("div", { class: "answer" });
  const detail = el("pre", { class: "detail" });
  const act = (method, path) => async () => {
    const done = await api(method, path);
    answerLine(answer, done);
    detail.textContent = method === "GET" && done.status === 200 ? JSON.stringify(done.body, null, 2) : "";
    refresh();
  };
  async function refresh() {
    const listed = await api("GET", "/v1/dead-letters");
    if (listed.status !== 200) { answerLine(answer, listed); return; }
    const admin = may("administer");
    rows.replaceChildren(...listed.body.dead_letters.map((d) => el("tr", {},
      el("td", {}, d.id), el("td", {}, d.queue), el("td", {}, d.actor || "(corrupt)"), el("td", {}, d.session_id || ""),
      el("td", {}, duration(d.age_s)), el("td", {}, d.error),
      el("td", {}, el("button", { onclick: act("GET", `/v1/dead-letters/${d.id}`) }, "Show"),
        admin ? el("button", { onclick: act("POST", `/v1/dead-letters/${d.id}/replay`) }, "Replay") : "",
        admin ? el("button", { onclick: act("DELETE", `/v1/dead-letters/${d.id}`) }, "Purge") : ""))));
  }
  show(el("h1", {}, "Dead letters"), answer,
    el("div", { class: "table" }, el("table", {}, el("thead", {}, el("tr", {}, ...["id", "queue", "actor", "session", "age", "error", ""].map((h) => el("th", {}, h)))), rows)),
    detail);
  refresh();
  return () => {};
}

// ── routing ────────────────────────────────────────────────────────────────────────────────

async function route() {
  stopView();
  stopView = () => {};
  if (keyLost) return;
  if (!key()) { show(el("p", { class: "hint" }, "Enter an API key to begin.")); return; }
  if (!who && !(await identify())) return;
  const hash = location.hash || "#/queue";
  for (const link of document.querySelectorAll("header nav a")) link.classList.toggle("here", hash.startsWith(link.getAttribute("href")));
  const call = hash.match(/^#\/call\/([A-Za-z0-9_-]{1,64})$/);
  const campaign = hash.match(/^#\/campaign\/([A-Za-z0-9_-]{1,64})$/);
  const agentPage = hash.match(/^#\/agent\/([a-z0-9][a-z0-9_-]{0,63})$/);
  const agentCalls = hash.match(/^#\/calls\?agent=([a-z0-9][a-z0-9_-]{0,63}(?:@[1-9][0-9]{0,8})?)$/);
  if (call) stopView = viewCall(call[1]);
  else if (campaign) stopView = viewCampaign(campaign[1]);
  else if (hash === "#/calls") stopView = viewCalls();
  else if (agentCalls) stopView = viewCalls(agentCalls[1]);
  else if (hash === "#/agents") stopView = viewAgents();
  else if (agentPage) stopView = viewAgent(agentPage[1]);
  else if (hash === "#/campaigns") stopView = viewCampaigns();
  else if (hash === "#/dead-letters") stopView = viewDeadLetters();
  else stopView = viewQueue();
}

document.getElementById("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  keyStore.setItem("switchboard.key", document.getElementById("key").value.trim());
  const name = document.getElementById("me").value.trim();
  if (name) keyStore.setItem("switchboard.me", name);
  document.getElementById("key").value = "";
  keyLost = false;
  who = null;
  route();
});
window.addEventListener("hashchange", route);
route();
