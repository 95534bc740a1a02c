// The chat page (docs/design/0606). It talks to /v1/conversations/{id}/messages with
// stream:true, lists past conversations from /v1/conversations, restores one from
// /v1/conversations/{id}, and learns the default persona and each persona's offline examples
// from /v1/bot. The open conversation is in the URL (#/c/<id>): reload, back and forward work.
// Who is signed in comes from /v1/me; the key is kept in sessionStorage (this tab only, never in
// a URL) until "Sign out". An admin may switch to another user's chats (?user=, /v1/admin/users).
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
const ROUTE = /^#\/c\/([A-Za-z0-9_-]{1,128})$/;
const OFFER = 4; // recorded questions offered under an offline "not recorded" error

const state = {
  token: sessionStorage.getItem("gf-token") || "",
  conversation: sessionStorage.getItem("gf-conversation") || "",
  defaultPersona: "",
  turn: null, // the running turn: { controller, answer }
  olderCursor: null,
  answers: 0,
  examples: {}, // persona -> its recorded questions (offline only)
  editing: false, // the next message replaces the last turn
  me: null, // GET /v1/me: who is signed in
  actingFor: "", // an admin looking at another user's chats: that user's name
};

class AuthNeeded extends Error {}

// A failure shown as one friendly line, with the server's words under "Details".
class Problem extends Error {
  constructor(summary, detail, code) {
    super(summary);
    this.detail = detail || "";
    this.code = code || "";
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
  const fragment = window.DOMPurify.sanitize(markdown.parse(text), SANITIZE);
  // A link whose address was refused (javascript:, data:...) reads as plain text, not a link.
  for (const link of fragment.querySelectorAll("a:not([href])")) link.replaceWith(...link.childNodes);
  return fragment;
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

// An admin looking at another user's chats names that user on every conversation request.
function scoped(path) {
  if (!state.actingFor || !path.startsWith("/v1/conversations")) return path;
  return path + (path.includes("?") ? "&" : "?") + "user=" + encodeURIComponent(state.actingFor);
}

async function api(path, options = {}) {
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  let response;
  try {
    response = await fetch(scoped(path), { ...options, headers });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new Problem("Could not reach the bot service. Check the connection and try again.",
      String(error.message || error));
  }
  if (response.status === 401) throw new AuthNeeded("the API key is missing, wrong or revoked");
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
  empty_messages: "The message is empty.",
  offline_not_recorded: "Offline mode only knows its recorded questions, and this is not one "
    + "of them. Ask one of the recorded questions instead:",
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
  const code = error && error.code ? String(error.code) : "";
  return new Problem(friendlyLine(response.status, error), describe(response.status, error), code);
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
  if (problem.code === "offline_not_recorded") box.append(offeredExamples());
  where.append(box);
  return box;
}

// The chosen persona's recorded questions as buttons: a few, and a way to see them all.
function offeredExamples() {
  const list = document.createElement("ul");
  list.className = "offer";
  const examples = personaExamples();
  list.append(...examples.slice(0, OFFER).map((text) => exampleItem(text)));
  if (examples.length > OFFER || !examples.length) {
    const item = document.createElement("li");
    const all = document.createElement("button");
    all.type = "button";
    all.textContent = examples.length ? `All ${examples.length} recorded questions`
      : "This persona has no recorded questions: pick another persona";
    all.addEventListener("click", () => {
      $("examples-menu").open = true;
      $("examples-menu").querySelector("summary").focus();
    });
    item.append(all);
    list.append(item);
  }
  return list;
}

function statusProblem(problem) {
  setStatus("");
  $("status").replaceChildren();
  showProblem($("status"), problem);
}

// reason: why the key that was tried did not sign in (a wrong, revoked or expired key), shown
// beside the form; none on a first visit, when no key was tried yet.
function askToken(retry, reason = "") {
  const form = $("token-form");
  signedOutView();
  const tried = Boolean(state.token);
  if (tried) { // a refused key is not tried again on reload
    state.token = "";
    sessionStorage.removeItem("gf-token");
  }
  const problem = $("token-error");
  problem.textContent = tried && reason
    ? `Sign-in failed: ${reason}. Check the key (or ask the bot's admin for a new one) and try again.`
    : "";
  problem.hidden = !problem.textContent;
  form.hidden = false;
  $("token").focus();
  form.onsubmit = (event) => {
    event.preventDefault();
    problem.hidden = true;
    state.token = $("token").value.trim();
    $("token").value = ""; // the key stays in sessionStorage only, not in the page
    sessionStorage.setItem("gf-token", state.token);
    form.hidden = true;
    setStatus("");
    retry();
  };
}

function handle(error, retry = start) {
  if (error instanceof AuthNeeded) askToken(retry, error.message);
  else if (error instanceof Problem) statusProblem(error);
  else statusProblem(new Problem("The page hit an unexpected problem.", String(error)));
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").hidden = !busy;
  document.body.dataset.busy = busy ? "true" : "false";
}

function scrollToEnd(node) { node.scrollIntoView({ block: "end" }); }

// The newest message in view: after a restore, that is the last answer, not the last question.
// Scrolling the log itself (not scrollIntoView) leaves the keyboard's Tab order where it was.
function scrollToNewest() {
  const log = $("log");
  log.scrollTop = log.scrollHeight;
}

function formatTime(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  if (date.toDateString() === new Date().toDateString()) {
    return date.toLocaleTimeString([], { timeStyle: "short" });
  }
  return date.toLocaleDateString([], { dateStyle: "medium" });
}

// ------------------------------------------------------------------ messages

function addUser(text, scroll = true) {
  const div = document.createElement("div");
  div.className = "msg user";
  div.textContent = text;
  $("log").append(div);
  if (scroll) scrollToEnd(div);
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
    this.actions = document.createElement("div");
    this.actions.className = "actions";
    this.div.append(this.progressLine, this.text, this.sources, this.actions);
    this.div.answer = this;
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
    this.raw = String(reply.content || "");
    this.show(this.raw, reply.citations);
    this.actions.replaceChildren(actionButton("Copy", "Copy this answer", () => this.copy()));
  }

  async copy() {
    const done = await copyText(this.raw);
    setStatus(done ? "Answer copied." : "Could not copy; select the text instead.");
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

function actionButton(label, title, onClick) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "action";
  button.textContent = label;
  button.title = title;
  button.addEventListener("click", onClick);
  return button;
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    // No clipboard API (a plain-http origin): copy through a selected, off-screen text area.
    const area = document.createElement("textarea");
    area.value = text;
    area.className = "visually-hidden";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
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
    const code = error.code ? String(error.code) : "";
    const line = code === "offline_not_recorded" ? friendlyLine(0, error)
      : "The answer broke off. " + friendlyLine(0, error);
    answer.fail(new Problem(line, describe(0, error), code));
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
  if (!persona) {
    setStatus($("token-form").hidden ? "Pick a persona first."
      : "Sign in first: enter your API key above, then send.");
    return;
  }
  if (!state.conversation) remember(newConversationId());
  $("examples-menu").open = false;
  clearLastActions();
  const { web, content: typed } = composed(text);
  const pictures = window.gfPictures.take();
  const content = window.gfPictures.content(typed, pictures);
  const userDiv = addUser(typed);
  window.gfPictures.show(userDiv, pictures);
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
      askToken(() => submit(text), error.message);
    } else if (error instanceof Problem) answer.fail(error);
    else answer.fail(new Problem("The answer was interrupted; try again.", String(error)));
  } finally {
    if (state.turn && state.turn.controller === controller) state.turn = null;
    setBusy(false);
  }
  if (answer.div.dataset.state === "done") loadConversations().catch((e) => handle(e));
  markLast();
  scrollToNewest(); // the whole answer, its error or its buttons in view
}

async function submit(text) {
  if (state.turn) return;
  setStatus("");
  if (state.editing) {
    try {
      await dropLastTurn();
    } catch (error) {
      handle(error);
      return;
    }
  }
  await send(text);
}

// ------------------------------------------------------------------ regenerate and edit

// The stored last turn is removed whole (question, tool rounds, answer), then asked again.
async function dropLastTurn() {
  endEditing();
  const path = `/v1/conversations/${encodeURIComponent(state.conversation)}/turns/last`;
  const response = await api(path, { method: "DELETE" });
  if (!response.ok && response.status !== 404) throw await problemOf(response);
  clearLastActions();
  const answer = Array.from($("log").querySelectorAll(".msg.assistant")).pop();
  const question = Array.from($("log").querySelectorAll(".msg.user")).pop();
  if (answer) answer.remove();
  if (question) question.remove();
}

function lastPair() {
  const answer = Array.from($("log").querySelectorAll(".msg.assistant")).pop();
  const question = Array.from($("log").querySelectorAll(".msg.user")).pop();
  return answer && question && answer.dataset.state === "done" ? { answer, question } : null;
}

function clearLastActions() {
  for (const node of $("log").querySelectorAll(".last-only")) node.remove();
}

// Regenerate on the last answer, Edit on the last question: only when that turn was stored.
function markLast() {
  clearLastActions();
  const pair = lastPair();
  if (!pair) return;
  const again = actionButton("Regenerate", "Ask the last question again", () => regenerate());
  again.classList.add("last-only");
  pair.answer.answer.actions.append(again);
  const edit = actionButton("Edit", "Edit and resend the last question", () => startEditing());
  edit.classList.add("last-only", "edit");
  pair.question.after(edit);
}

async function regenerate() {
  const pair = lastPair();
  if (!pair || state.turn) return;
  state.editing = true;
  $("search").checked = false;
  await submit(pair.question.textContent);
}

function startEditing() {
  const pair = lastPair();
  if (!pair || state.turn) return;
  state.editing = true;
  $("search").checked = false;
  $("input").value = pair.question.textContent;
  $("editing").hidden = false;
  $("input").focus();
}

function endEditing() {
  state.editing = false;
  $("editing").hidden = true;
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

// The open conversation: kept for the tab, and in the URL (#/c/<id>), a history entry each.
function remember(id, how = "push") {
  state.conversation = id;
  sessionStorage.setItem("gf-conversation", id);
  const hash = "#/c/" + id;
  if (location.hash !== hash) {
    if (how === "push") history.pushState(null, "", hash);
    else history.replaceState(null, "", hash);
  }
  markCurrent();
}

function routedConversation() {
  const match = ROUTE.exec(location.hash);
  return match ? match[1] : "";
}

// Back, forward, or an edited address: open the conversation the URL names.
function followRoute() {
  const id = routedConversation();
  if (!id || id === state.conversation) return;
  openConversation(id, "none").catch((e) => handle(e));
}

function startConversation(focus = true) {
  stopTurn();
  endEditing();
  remember(newConversationId());
  $("log").replaceChildren();
  selectPersona(state.defaultPersona);
  renderExamples();
  $("examples-menu").open = true;
  closeSidebar();
  if (focus) $("input").focus();
}

function selectPersona(name) {
  const select = $("persona");
  if (name && Array.from(select.options).some((o) => o.value === name)) select.value = name;
}

async function openConversation(id, how = "push") {
  stopTurn();
  endEditing();
  if (how === "none") {
    state.conversation = id;
    sessionStorage.setItem("gf-conversation", id);
    markCurrent();
  } else remember(id, how);
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
  renderExamples();
  for (const turn of body.turns || []) {
    const userDiv = addUser(turnQuestion(turn, body.messages || []), false);
    const pictures = (body.pictures || []).filter((p) => p.turn === turn.turn);
    if (pictures.length) await window.gfPictures.restore(userDiv, state.conversation, pictures, api);
    const answer = new Answer("");
    answer.finish({ content: turn.answer || "", citations: turn.citations || [] });
  }
  $("examples-menu").open = false;
  markLast();
  scrollToNewest();
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
  const rename = document.createElement("button");
  rename.type = "button";
  rename.className = "rename";
  rename.textContent = "✎";
  rename.title = "Rename this conversation";
  rename.setAttribute("aria-label", `Rename “${title.textContent}”`);
  rename.addEventListener("click", () => {
    renameConversation(conversation.id, title.textContent).catch((e) => handle(e));
  });
  item.append(open, rename, remove);
  return item;
}

async function renameConversation(id, current) {
  const title = window.prompt("A new name for this conversation:", current);
  if (title === null || !title.trim()) return;
  const response = await api(`/v1/conversations/${encodeURIComponent(id)}`, {
    method: "PATCH",
    body: JSON.stringify({ title: title.trim() }),
  });
  if (!response.ok) throw await problemOf(response);
  await loadConversations();
}

// The search box filters the listed conversations by title (and persona), as one types.
function filterConversations() {
  const words = $("search-chats").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const item of $("conversations").children) {
    const text = item.querySelector(".conversation").textContent.toLowerCase();
    item.hidden = !words.every((word) => text.includes(word));
    if (!item.hidden) shown += 1;
  }
  $("no-match").hidden = !words.length || shown > 0;
}

// ------------------------------------------------------------------ export

async function exportConversation(format) {
  $("export-menu").open = false;
  const body = await getJson(`/v1/conversations/${encodeURIComponent(state.conversation)}`)
    .catch((error) => {
      if (error instanceof Problem && error.detail.startsWith("HTTP 404")) return null;
      throw error;
    });
  if (!body) { setStatus("Nothing to export yet: ask something first."); return; }
  const listed = document.querySelector(`#conversations [data-id="${CSS.escape(body.id)}"] .title`);
  const title = listed ? listed.textContent : body.id;
  const text = format === "json" ? JSON.stringify(body, null, 2) + "\n" : asMarkdown(body, title);
  const type = format === "json" ? "application/json" : "text/markdown";
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: type + ";charset=utf-8" }));
  link.download = `${state.conversation}.${format === "json" ? "json" : "md"}`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}

function asMarkdown(body, title) {
  const lines = [`# ${title}`, ""];
  for (const turn of body.turns || []) {
    lines.push(`## You (${turn.persona || body.persona})`, "", turnQuestion(turn, body.messages || []), "");
    lines.push("## Answer", "", String(turn.answer || ""), "");
    for (const citation of turn.citations || []) {
      lines.push(`${citation.number}. [${citation.title || citation.url}](${citation.url})`);
    }
    if ((turn.citations || []).length) lines.push("");
  }
  return lines.join("\n");
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
  filterConversations();
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

// ------------------------------------------------------------------ who is signed in

// Nothing of the previous user stays on the page: chats, the open conversation, personas.
function signedOutView() {
  state.me = null;
  state.actingFor = "";
  $("account").hidden = true;
  $("log").replaceChildren();
  $("conversations").replaceChildren();
  $("no-conversations").hidden = true;
  $("more-conversations").hidden = true;
}

function signOut() {
  stopTurn();
  state.token = "";
  state.conversation = "";
  sessionStorage.removeItem("gf-token");
  sessionStorage.removeItem("gf-conversation");
  history.replaceState(null, "", location.pathname);
  setStatus("Signed out.");
  askToken(start);
}

async function loadAccount() {
  const me = await getJson("/v1/me");
  state.me = me;
  const admin = me.user.role === "admin";
  $("who").textContent = me.via === "local"
    ? "Local use: no sign-in needed"
    : `Signed in as ${me.user.name}${admin ? " (admin)" : ""}`;
  $("sign-out").hidden = me.via !== "key" && me.via !== "token";
  $("account").hidden = false;
  const switcher = $("user-switch");
  switcher.hidden = $("user-switch-label").hidden = !admin;
  if (!admin) return;
  const users = await getJson("/v1/admin/users");
  switcher.replaceChildren(...users.data.map((user) => {
    const option = document.createElement("option");
    option.value = user.name;
    option.textContent = user.name === me.user.name ? `${user.name} (me)` : user.name;
    return option;
  }));
  switcher.value = state.actingFor || me.user.name;
}

async function switchUser() {
  const name = $("user-switch").value;
  state.actingFor = state.me && name === state.me.user.name ? "" : name;
  startConversation(false);
  await loadConversations();
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
  const byPersona = info.persona_examples && typeof info.persona_examples === "object"
    ? info.persona_examples : {};
  state.examples = {};
  for (const [name, list] of Object.entries(byPersona)) {
    if (Array.isArray(list)) state.examples[name] = list.map(String);
  }
  $("offline").hidden = !info.offline;
  $("examples-menu").open = Boolean(info.offline) && !$("log").children.length;
  renderExamples();
}

function personaExamples() {
  return state.examples[$("persona").value] || [];
}

function exampleItem(text) {
  const item = document.createElement("li");
  const button = document.createElement("button");
  button.type = "button";
  button.className = "example";
  button.textContent = text;
  button.addEventListener("click", () => {
    if (state.turn) return;
    endEditing(); // an example is a new question, never a replacement of the last one
    $("search").checked = false; // the question is sent exactly as it was recorded
    submit(text);
  });
  item.append(button);
  return item;
}

// The recorded questions of the chosen persona: switching persona switches the list, and an
// example is asked with the persona that is chosen, never another.
function renderExamples() {
  const persona = $("persona").value;
  const examples = personaExamples();
  const others = Object.keys(state.examples).filter((name) => name !== persona
    && state.examples[name].length);
  $("examples-persona").textContent = examples.length
    ? `Questions ${persona} has answers for:`
    : `${persona || "This persona"} has no recorded answers; pick ${others.join(" or ") || "another persona"}.`;
  $("examples").replaceChildren(...examples.map((text) => exampleItem(text)));
}

async function start() {
  try {
    await loadPersonas();
    await loadAccount();
    await loadBotInfo();
    const routed = routedConversation();
    if (routed) state.conversation = routed;
    if (state.conversation) {
      remember(state.conversation, "replace");
      await restoreConversation();
    } else remember(newConversationId(), "replace");
    await loadConversations();
  } catch (error) {
    handle(error, start);
  }
}

// Enter sends (not while an IME composes); Escape stops a turn, else leaves an edit.
function onInputKey(event) {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("chat-form").requestSubmit();
  } else if (event.key === "Escape" && state.turn) {
    stopTurn();
  } else if (event.key === "Escape" && state.editing) {
    endEditing();
    $("input").value = "";
  }
}

// Persona examples, search, export, the edit note, and the URL's conversation.
function wireConversationTools() {
  $("persona").addEventListener("change", renderExamples);
  $("search-chats").addEventListener("input", filterConversations);
  $("export-md").addEventListener("click", () => exportConversation("md").catch((e) => handle(e)));
  $("export-json").addEventListener("click", () => exportConversation("json").catch((e) => handle(e)));
  $("cancel-edit").addEventListener("click", () => { endEditing(); $("input").value = ""; });
  window.addEventListener("popstate", followRoute);
  window.addEventListener("hashchange", followRoute);
}

function init() {
  setUpMarkdown();
  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value;
    if ((!text.trim() && !window.gfPictures.has()) || state.turn) return;
    $("input").value = "";
    submit(text);
  });
  $("input").addEventListener("keydown", onInputKey);
  $("stop").addEventListener("click", () => { stopTurn(); $("input").focus(); });
  $("new-chat").addEventListener("click", () => startConversation());
  $("sign-out").addEventListener("click", signOut);
  $("user-switch").addEventListener("change", () => switchUser().catch((e) => handle(e)));
  wireConversationTools();
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
