// The chat page (docs/design/0606). It talks to /v1/conversations/{id}/messages with
// stream:true, lists past conversations from /v1/conversations, restores one from
// /v1/conversations/{id}, and learns the default persona and offline examples from /v1/bot.
//
// Safety: server text reaches the DOM either through textContent, or as markdown rendered by the
// vendored marked (raw HTML in it escaped, so it shows as text) and then sanitised by the
// vendored DOMPurify into a DOM fragment (only a short list of tags, only http(s) and in-page
// links). No innerHTML, no inline script (the CSP forbids it).
"use strict";

const $ = (id) => document.getElementById(id);
const WEB_PREFIX = "//";
const SEARCH_TOOLS = new Set(["web_search", "search_web"]);
const PAGE_SIZE = 30;
const MARKER = /\[(?:ref_)?(\d{1,3})\]/gi;

const state = {
  token: sessionStorage.getItem("gf-token") || "",
  conversation: sessionStorage.getItem("gf-conversation") || "",
  defaultPersona: "",
  turn: null, // the running turn: { controller, answer }
  olderCursor: null,
  answers: 0,
};

class AuthNeeded extends Error {}

// A failure shown as one friendly line, with the server's words under "Details".
class Problem extends Error {
  constructor(summary, detail) {
    super(summary);
    this.detail = detail || "";
  }
}

// ------------------------------------------------------------------ markdown

const SANITIZE = {
  ALLOWED_TAGS: [
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
    "span", "input",
  ],
  ALLOWED_ATTR: ["href", "title", "start", "align", "type", "checked", "disabled"],
  ALLOWED_URI_REGEXP: /^(?:https?:\/\/|mailto:|#)/i,
  RETURN_DOM_FRAGMENT: true,
};

let markdown = null;

function setUpMarkdown() {
  const escapeHtml = (text) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  markdown = new window.marked.Marked({ gfm: true, breaks: true });
  // Raw HTML in an answer is shown as text, never parsed (DOMPurify would drop it anyway).
  markdown.use({ renderer: { html: (token) => escapeHtml(token.text) } });
  window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A" && node.hasAttribute("href")) {
      if (!node.getAttribute("href").startsWith("#")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    }
    if (node.tagName === "INPUT" && node.getAttribute("type") !== "checkbox") node.remove();
  });
}

function renderMarkdown(text) {
  if (!markdown) {
    const p = document.createElement("p");
    p.textContent = text;
    return p;
  }
  return window.DOMPurify.sanitize(markdown.parse(text), SANITIZE);
}

// [n] (or a raw [ref_N]) becomes a link to source n when the answer has it; code is left alone.
function linkMarkers(root, sources) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (!node.parentElement.closest("code, pre, a") && /\[(?:ref_)?\d/i.test(node.data)) {
      nodes.push(node);
    }
  }
  for (const node of nodes) node.replaceWith(markedUp(node.data, sources));
}

function markedUp(text, sources) {
  const out = document.createDocumentFragment();
  let last = 0;
  for (const match of text.matchAll(MARKER)) {
    const number = Number(match[1]);
    out.append(text.slice(last, match.index));
    const target = sources.get(number);
    if (target) {
      const link = document.createElement("a");
      link.className = "cite";
      link.href = "#" + target.id;
      link.textContent = `[${number}]`;
      link.setAttribute("aria-label", `source ${number}`);
      out.append(link);
    } else {
      out.append(`[${number}]`);
    }
    last = match.index + match[0].length;
  }
  out.append(text.slice(last));
  return out;
}

// ------------------------------------------------------------------ talking to the service

async function api(path, options = {}) {
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  let response;
  try {
    response = await fetch(path, { ...options, headers });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new Problem("Could not reach the bot service. Check the connection and try again.",
      String(error.message || error));
  }
  if (response.status === 401) throw new AuthNeeded("the API token is missing or wrong");
  return response;
}

const FRIENDLY = {
  400: "The service did not accept that message.",
  403: "The bot's model service refused this; tell the bot's operator.",
  404: "That was not found on the service.",
  408: "The message took too long to arrive; try again.",
  413: "That message is too long for the service.",
  415: "The service refused the request's format.",
  429: "The bot is busy right now; try again in a moment.",
  502: "The language model service failed to answer; try again.",
  503: "The bot is busy or the model service is unavailable; try again in a moment.",
  504: "The language model service took too long to answer; try again.",
};

const FRIENDLY_CODES = {
  model_not_found: "That persona is not served any more; pick another.",
  message_too_long: "That message is too long; shorten it.",
  empty_message: "The message is empty.",
  content_filter: "The model's content filter blocked this answer.",
  upstream_account_unusable: "The bot's model account cannot be used right now; tell its operator.",
  upstream_auth_failed: "The bot's model service refused its key; tell its operator.",
  upstream_rate_limited: "The model service is busy; try again in a moment.",
  rate_limited: "The model service is busy; try again in a moment.",
  upstream_overloaded: "The model is overloaded right now; try again in a moment.",
  quota_exceeded: "The bot's model plan has reached its limit; try again later.",
  upstream_plan: "The bot's model plan does not allow this; tell its operator.",
  upstream_no_permission: "The bot's model account may not do this; tell its operator.",
  upstream_timeout: "The language model service took too long to answer; try again.",
  upstream_unreachable: "The bot could not reach its language model service; try again.",
};

// Z.AI's business codes, which the service passes on as `code` when the upstream gave one.
function businessLine(code) {
  const n = Number(code);
  if (!Number.isInteger(n) || n < 1000) return "";
  if (n === 1301) return FRIENDLY_CODES.content_filter;
  if (n >= 1000 && n <= 1004) return FRIENDLY_CODES.upstream_auth_failed;
  if (n >= 1110 && n <= 1121) return FRIENDLY_CODES.upstream_account_unusable;
  if (n === 1220) return FRIENDLY_CODES.upstream_no_permission;
  if ([1302, 1303].includes(n)) return FRIENDLY_CODES.rate_limited;
  if ([1305, 1312].includes(n)) return FRIENDLY_CODES.upstream_overloaded;
  if ([1304, 1308, 1310].includes(n)) return FRIENDLY_CODES.quota_exceeded;
  if ([1309, 1311].includes(n)) return FRIENDLY_CODES.upstream_plan;
  return "";
}

function friendlyLine(status, error) {
  const code = error && error.code !== undefined && error.code !== null ? String(error.code) : "";
  if (Object.hasOwn(FRIENDLY_CODES, code)) return FRIENDLY_CODES[code];
  const business = businessLine(code);
  if (business) return business;
  if (status && FRIENDLY[status]) return FRIENDLY[status];
  if (status >= 500 || !status) return "Something went wrong on the service; try again.";
  return "The request was refused.";
}

function describe(status, error) {
  const parts = [];
  if (status) parts.push("HTTP " + status);
  if (error && error.type) parts.push(String(error.type));
  if (error && error.code) parts.push(String(error.code));
  const head = parts.join(" · ");
  const message = error && error.message ? String(error.message) : "";
  return (head + (head && message ? "\n" : "") + message).slice(0, 2000);
}

async function problemOf(response) {
  let error = null;
  try {
    const body = await response.json();
    if (body && typeof body.error === "object") error = body.error;
  } catch (_) { /* not JSON */ }
  return new Problem(friendlyLine(response.status, error), describe(response.status, error));
}

async function getJson(path) {
  const response = await api(path);
  if (!response.ok) throw await problemOf(response);
  return response.json();
}

// ------------------------------------------------------------------ small UI helpers

function setStatus(text) { $("status").textContent = text || ""; }

function showProblem(where, problem) {
  const box = document.createElement("div");
  box.className = "error";
  box.setAttribute("role", "alert");
  const line = document.createElement("span");
  line.className = "error-line";
  line.textContent = problem.message;
  box.append(line);
  if (problem.detail) {
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "Details";
    const pre = document.createElement("pre");
    pre.textContent = problem.detail;
    details.append(summary, pre);
    box.append(details);
  }
  where.append(box);
  return box;
}

function statusProblem(problem) {
  setStatus("");
  $("status").replaceChildren();
  showProblem($("status"), problem);
}

function askToken(retry) {
  const form = $("token-form");
  form.hidden = false;
  $("token").focus();
  form.onsubmit = (event) => {
    event.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("gf-token", state.token);
    form.hidden = true;
    setStatus("");
    retry();
  };
}

function handle(error, retry = start) {
  if (error instanceof AuthNeeded) askToken(retry);
  else if (error instanceof Problem) statusProblem(error);
  else statusProblem(new Problem("The page hit an unexpected problem.", String(error)));
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").hidden = !busy;
  document.body.dataset.busy = busy ? "true" : "false";
}

function scrollToEnd(node) { node.scrollIntoView({ block: "end" }); }

function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  if (date.toDateString() === new Date().toDateString()) {
    return date.toLocaleTimeString([], { timeStyle: "short" });
  }
  return date.toLocaleDateString([], { dateStyle: "medium" });
}

// ------------------------------------------------------------------ messages

function addUser(text) {
  const div = document.createElement("div");
  div.className = "msg user";
  div.textContent = text;
  $("log").append(div);
  scrollToEnd(div);
  return div;
}

class Answer {
  constructor(label) {
    this.id = `a${++state.answers}`;
    this.raw = "";
    this.pending = false;
    this.div = document.createElement("article");
    this.div.className = "msg assistant";
    this.div.dataset.state = "running";
    this.div.setAttribute("aria-label", "Answer");
    this.progressLine = document.createElement("div");
    this.progressLine.className = "progress";
    this.text = document.createElement("div");
    this.text.className = "text";
    this.sources = document.createElement("ol");
    this.sources.className = "sources";
    this.sources.setAttribute("aria-label", "Sources");
    this.div.append(this.progressLine, this.text, this.sources);
    $("log").append(this.div);
    this.progressLine.textContent = label || "";
  }

  show(text, citations) {
    const byNumber = this.listSources(citations || []);
    this.text.replaceChildren(renderMarkdown(text));
    linkMarkers(this.text, byNumber);
  }

  append(text) {
    this.raw += text;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      if (this.div.dataset.state !== "running") return;
      this.text.replaceChildren(renderMarkdown(this.raw));
      linkMarkers(this.text, new Map()); // a raw [ref_N] reads [N] until the sources arrive
      scrollToEnd(this.div);
    });
  }

  progress(event) {
    if (event.event === "round_started") {
      const tools = Array.isArray(event.tools) ? event.tools : [];
      this.progressLine.textContent = tools.length && tools.every((t) => SEARCH_TOOLS.has(t))
        ? "Searching the web…"
        : "Running " + tools.map(String).join(", ") + "…";
    } else if (event.event === "tool_finished") {
      const mark = event.ok ? "done" : "failed";
      this.progressLine.textContent = `${event.name} ${mark} (${Math.round(event.ms)} ms)…`;
    } // other progress events are not known to this page: ignored
  }

  listSources(citations) {
    const byNumber = new Map();
    this.sources.replaceChildren();
    for (const citation of citations) {
      const number = Number(citation.number);
      const item = document.createElement("li");
      item.id = `src-${this.id}-${number}`;
      item.value = number;
      item.tabIndex = -1;
      const label = citation.title || citation.site || citation.url || "source";
      const href = safeUrl(citation.url);
      if (href) {
        const link = document.createElement("a");
        link.href = href;
        link.textContent = label;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
        item.append(link);
      } else {
        item.append(label);
      }
      if (citation.site && citation.site !== label) item.append(" — " + citation.site);
      this.sources.append(item);
      byNumber.set(number, item);
    }
    return byNumber;
  }

  finish(reply) {
    // The stored reply is the truth: [n] markers, tool-round chatter gone.
    this.div.dataset.state = "done";
    this.progressLine.textContent = "";
    this.show(String(reply.content || ""), reply.citations);
  }

  fail(problem) {
    if (this.div.dataset.state !== "running") return;
    this.div.dataset.state = "error";
    this.progressLine.textContent = "";
    showProblem(this.div, problem);
  }

  stopped() {
    if (this.div.dataset.state !== "running") return;
    this.div.dataset.state = "stopped";
    this.text.replaceChildren(renderMarkdown(this.raw));
    this.progressLine.textContent = "";
    const note = document.createElement("p");
    note.className = "note";
    note.textContent = "Stopped. This turn was not kept.";
    this.div.append(note);
  }
}

function safeUrl(url) {
  try {
    const parsed = new URL(String(url));
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) { return null; }
}

// ------------------------------------------------------------------ the stream

function frameData(raw) {
  // SSE: only data: lines count; comments (": keep-alive"), event: and id: lines are skipped.
  return raw.split(/\r?\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).replace(/^ /, ""))
    .join("\n");
}

function handleFrame(raw, answer) {
  const data = frameData(raw);
  if (!data || data === "[DONE]") return;
  let chunk;
  try { chunk = JSON.parse(data); } catch (_) { return; } // not a frame this page knows
  if (!chunk || typeof chunk !== "object") return;
  if (chunk.error) {
    const error = typeof chunk.error === "object" ? chunk.error : { message: String(chunk.error) };
    answer.fail(new Problem("The answer broke off. " + friendlyLine(0, error), describe(0, error)));
    return;
  }
  if (chunk.progress && typeof chunk.progress === "object") answer.progress(chunk.progress);
  const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : null;
  const delta = choice && choice.delta;
  if (delta && typeof delta.content === "string" && delta.content) answer.append(delta.content);
  if (chunk.reply && typeof chunk.reply === "object") answer.finish(chunk.reply);
}

async function readStream(response, answer) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let match;
    while ((match = /\r?\n\r?\n/.exec(buffer)) !== null) {
      handleFrame(buffer.slice(0, match.index), answer);
      buffer = buffer.slice(match.index + match[0].length);
    }
  }
  if (buffer.trim()) handleFrame(buffer, answer);
  answer.fail(new Problem("The answer ended early; try again.", "the stream closed before its last frame"));
}

// ------------------------------------------------------------------ a turn

function composed(text) {
  const web = $("search").checked || text.trimStart().startsWith(WEB_PREFIX);
  const content = web && !text.trimStart().startsWith(WEB_PREFIX) ? `${WEB_PREFIX} ${text}` : text;
  return { web, content };
}

async function send(text) {
  const persona = $("persona").value;
  if (!persona) { setStatus("Pick a persona first."); return; }
  if (!state.conversation) remember(newConversationId());
  const { web, content } = composed(text);
  const userDiv = addUser(content);
  const answer = new Answer(web ? "Searching the web…" : "Thinking…");
  const controller = new AbortController();
  state.turn = { controller, answer };
  setBusy(true);
  try {
    const path = `/v1/conversations/${encodeURIComponent(state.conversation)}/messages`;
    const response = await api(path, {
      method: "POST",
      body: JSON.stringify({ persona, content, stream: true }),
      signal: controller.signal,
    });
    if (!response.ok) throw await problemOf(response);
    await readStream(response, answer);
  } catch (error) {
    if (error.name === "AbortError") answer.stopped();
    else if (error instanceof AuthNeeded) {
      userDiv.remove();
      answer.div.remove();
      askToken(() => submit(text));
    } else if (error instanceof Problem) answer.fail(error);
    else answer.fail(new Problem("The answer was interrupted; try again.", String(error)));
  } finally {
    if (state.turn && state.turn.controller === controller) state.turn = null;
    setBusy(false);
  }
  if (answer.div.dataset.state === "done") loadConversations();
}

async function submit(text) {
  if (state.turn) return;
  setStatus("");
  await send(text);
}

function stopTurn() {
  // Aborting the fetch closes the connection: the service cancels the turn and stores nothing.
  if (state.turn) state.turn.controller.abort();
}

// ------------------------------------------------------------------ conversations

function newConversationId() {
  // crypto.getRandomValues works on plain-http origins, unlike crypto.randomUUID.
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function remember(id) {
  state.conversation = id;
  sessionStorage.setItem("gf-conversation", id);
  markCurrent();
}

function startConversation(focus = true) {
  stopTurn();
  remember(newConversationId());
  $("log").replaceChildren();
  selectPersona(state.defaultPersona);
  closeSidebar();
  if (focus) $("input").focus();
}

function selectPersona(name) {
  const select = $("persona");
  if (name && Array.from(select.options).some((o) => o.value === name)) select.value = name;
}

async function openConversation(id) {
  stopTurn();
  remember(id);
  closeSidebar();
  await restoreConversation();
  $("input").focus();
}

function turnQuestion(turn, messages) {
  if (typeof turn.input === "string") return turn.input;
  const user = messages.find((m) => m.turn === turn.turn && m.role === "user");
  return user && typeof user.content === "string" ? user.content : "";
}

async function restoreConversation() {
  $("log").replaceChildren();
  const response = await api(`/v1/conversations/${encodeURIComponent(state.conversation)}`);
  if (response.status === 404) return; // a new conversation: nothing stored yet
  if (!response.ok) throw await problemOf(response);
  const body = await response.json();
  selectPersona(body.persona);
  for (const turn of body.turns || []) {
    addUser(turnQuestion(turn, body.messages || []));
    const answer = new Answer("");
    answer.finish({ content: turn.answer || "", citations: turn.citations || [] });
  }
}

function conversationItem(conversation) {
  const item = document.createElement("li");
  const open = document.createElement("button");
  open.type = "button";
  open.className = "conversation";
  open.dataset.id = conversation.id;
  const title = document.createElement("span");
  title.className = "title";
  title.textContent = conversation.title || "(untitled)";
  const meta = document.createElement("span");
  meta.className = "meta";
  const turns = conversation.turns === 1 ? "1 turn" : `${conversation.turns} turns`;
  meta.textContent = `${conversation.persona} · ${turns} · ${formatTime(conversation.updated_at)}`;
  open.append(title, meta);
  open.addEventListener("click", () => openConversation(conversation.id).catch((e) => handle(e)));
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "delete";
  remove.textContent = "×";
  remove.title = "Delete this conversation";
  remove.setAttribute("aria-label", `Delete “${title.textContent}”`);
  remove.addEventListener("click", () => deleteConversation(conversation.id).catch((e) => handle(e)));
  item.append(open, remove);
  return item;
}

function markCurrent() {
  for (const button of document.querySelectorAll("#conversations .conversation")) {
    if (button.dataset.id === state.conversation) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

async function loadConversations(older = false) {
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (older && state.olderCursor) query.set("before", state.olderCursor);
  const body = await getJson("/v1/conversations?" + query);
  const list = $("conversations");
  const items = (body.data || []).map(conversationItem);
  if (older) list.append(...items);
  else list.replaceChildren(...items);
  state.olderCursor = body.next_before || null;
  $("more-conversations").hidden = !state.olderCursor;
  $("no-conversations").hidden = list.children.length > 0;
  markCurrent();
}

async function deleteConversation(id) {
  if (!window.confirm("Delete this conversation? This cannot be undone.")) return;
  const response = await api(`/v1/conversations/${encodeURIComponent(id)}`, { method: "DELETE" });
  if (!response.ok && response.status !== 404) throw await problemOf(response);
  if (id === state.conversation) startConversation(false);
  await loadConversations();
}

// ------------------------------------------------------------------ the sidebar on a phone

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("menu").setAttribute("aria-expanded", "false");
}

function toggleSidebar() {
  const open = !document.body.classList.contains("sidebar-open");
  document.body.classList.toggle("sidebar-open", open);
  $("menu").setAttribute("aria-expanded", String(open));
  if (open) $("new-chat").focus();
}

// ------------------------------------------------------------------ start-up

async function loadPersonas() {
  const body = await getJson("/v1/models");
  $("persona").replaceChildren(...body.data.map((model) => {
    const option = document.createElement("option");
    option.value = model.id;
    option.textContent = model.id;
    if (model.description) option.title = model.description;
    return option;
  }));
  if (!body.data.length) setStatus("No personas are configured on the server.");
}

async function loadBotInfo() {
  const info = await getJson("/v1/bot");
  state.defaultPersona = typeof info.default_persona === "string" ? info.default_persona : "";
  selectPersona(state.defaultPersona);
  const examples = Array.isArray(info.examples) ? info.examples : [];
  $("offline").hidden = !info.offline;
  $("examples").replaceChildren(...examples.map((example) => {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "example";
    button.textContent = String(example);
    button.addEventListener("click", () => {
      if (state.turn) return;
      $("search").checked = false;
      selectPersona(state.defaultPersona);
      submit(String(example));
    });
    item.append(button);
    return item;
  }));
}

async function start() {
  try {
    await loadPersonas();
    await loadBotInfo();
    if (state.conversation) await restoreConversation();
    else remember(newConversationId());
    await loadConversations();
  } catch (error) {
    handle(error, start);
  }
}

function init() {
  setUpMarkdown();
  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value;
    if (!text.trim() || state.turn) return;
    $("input").value = "";
    submit(text);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("chat-form").requestSubmit();
    } else if (event.key === "Escape" && state.turn) {
      stopTurn();
    }
  });
  $("stop").addEventListener("click", () => { stopTurn(); $("input").focus(); });
  $("new-chat").addEventListener("click", () => startConversation());
  $("menu").addEventListener("click", toggleSidebar);
  $("more-conversations").addEventListener("click", () => loadConversations(true).catch((e) => handle(e)));
  $("log").addEventListener("click", (event) => {
    const cite = event.target.closest("a.cite");
    if (!cite) return;
    event.preventDefault();
    const target = document.getElementById(cite.getAttribute("href").slice(1));
    if (target) { target.scrollIntoView({ block: "center" }); target.focus(); }
  });
  document.addEventListener("click", (event) => {
    // On a phone the open sidebar covers the page: a tap beside it closes it.
    const open = document.body.classList.contains("sidebar-open");
    if (open && !event.target.closest("#sidebar, #menu")) closeSidebar();
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && document.body.classList.contains("sidebar-open")) {
      closeSidebar();
      $("menu").focus();
    }
  });
  setBusy(false);
  start();
}

init();
