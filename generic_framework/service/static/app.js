// The chat page: talks to /v1/conversations/{id}/messages with stream:true and renders the
// chat.completion.chunk frames as they arrive. Text from the server is only ever inserted as
// text (textContent), and only http(s) links become anchors.
"use strict";

const $ = (id) => document.getElementById(id);
const WEB_PREFIX = "//";
const SEARCH_TOOLS = new Set(["web_search", "search_web"]);

const state = {
  token: sessionStorage.getItem("gf-token") || "",
  conversation: sessionStorage.getItem("gf-conversation") || "",
  busy: false,
};

class AuthNeeded extends Error {}

function newConversationId() {
  // crypto.getRandomValues works on plain-http origins, unlike crypto.randomUUID.
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function startConversation() {
  state.conversation = newConversationId();
  sessionStorage.setItem("gf-conversation", state.conversation);
  $("log").replaceChildren();
}

async function api(path, options = {}) {
  const headers = { "Content-Type": "application/json" };
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) throw new AuthNeeded("the API token is missing or wrong");
  return response;
}

async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) return body.error.message;
  } catch (_) { /* not JSON */ }
  return "HTTP " + response.status;
}

function setStatus(text) { $("status").textContent = text || ""; }

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

async function loadPersonas() {
  try {
    const response = await api("/v1/models");
    if (!response.ok) throw new Error(await errorText(response));
    const body = await response.json();
    const select = $("persona");
    select.replaceChildren(...body.data.map((model) => {
      const option = document.createElement("option");
      option.value = model.id;
      option.textContent = model.description ? `${model.id} (${model.description})` : model.id;
      return option;
    }));
    if (!body.data.length) setStatus("No personas are configured on the server.");
    await restoreConversation();
  } catch (error) {
    if (error instanceof AuthNeeded) askToken(loadPersonas);
    else setStatus("Could not list the personas: " + error.message);
  }
}

async function restoreConversation() {
  // After a reload: show the stored turns (questions and final answers) of this tab's conversation.
  const response = await api(`/v1/conversations/${encodeURIComponent(state.conversation)}`);
  if (!response.ok) return;
  const body = await response.json();
  $("log").replaceChildren();
  for (const message of body.messages) {
    if (message.role === "user") addMessage("user", message.content);
    else if (message.role === "assistant" && !message.tool_calls && message.content) {
      addMessage("assistant", message.content);
    }
  }
}

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("log").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function safeUrl(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch (_) { return null; }
}

class Answer {
  constructor(isSearch) {
    this.div = document.createElement("div");
    this.div.className = "msg assistant";
    this.div.dataset.state = "running";
    this.progressLine = document.createElement("div");
    this.progressLine.className = "progress";
    this.text = document.createElement("div");
    this.text.className = "text";
    this.sources = document.createElement("ol");
    this.sources.className = "sources";
    this.div.append(this.progressLine, this.text, this.sources);
    $("log").append(this.div);
    this.progressLine.textContent = isSearch ? "Searching the web…" : "Thinking…";
  }

  append(text) {
    this.text.textContent += text;
    this.div.scrollIntoView({ block: "end" });
  }

  progress(event) {
    if (event.event === "round_started") {
      const tools = event.tools || [];
      this.progressLine.textContent = tools.every((t) => SEARCH_TOOLS.has(t))
        ? "Searching the web…"
        : "Running " + tools.join(", ") + "…";
    } else if (event.event === "tool_finished") {
      const mark = event.ok ? "done" : "failed";
      this.progressLine.textContent = `${event.name} ${mark} (${Math.round(event.ms)} ms)…`;
    }
  }

  finish(reply) {
    // The stored reply is the truth: [ref_N] markers rewritten to [n], tool-round chatter gone.
    this.text.textContent = reply.content;
    this.progressLine.textContent = "";
    for (const citation of reply.citations || []) {
      const item = document.createElement("li");
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
        item.textContent = label;
      }
      if (citation.site && citation.site !== label) item.append(" — " + citation.site);
      this.sources.append(item);
    }
    this.div.dataset.state = "done";
  }

  fail(message) {
    this.progressLine.textContent = "";
    const error = document.createElement("div");
    error.className = "error";
    error.textContent = "Error: " + message;
    this.div.append(error);
    this.div.dataset.state = "error";
  }
}

function handleFrame(raw, answer) {
  const data = raw.split(/\r?\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).replace(/^ /, ""))
    .join("\n");
  if (!data || data === "[DONE]") return;
  const chunk = JSON.parse(data);
  if (chunk.error) { answer.fail(chunk.error.message || "the answer failed"); return; }
  if (chunk.progress) answer.progress(chunk.progress);
  const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
  if (delta && delta.content) answer.append(delta.content);
  if (chunk.reply) answer.finish(chunk.reply);
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
  if (answer.div.dataset.state === "running") answer.fail("the stream ended early");
}

async function send(text) {
  const persona = $("persona").value;
  if (!persona) { setStatus("Pick a persona first."); return; }
  const isSearch = $("search").checked || text.trimStart().startsWith(WEB_PREFIX);
  const content = isSearch && !text.trimStart().startsWith(WEB_PREFIX) ? `${WEB_PREFIX} ${text}` : text;
  const userDiv = addMessage("user", content);
  const answer = new Answer(isSearch);
  try {
    const path = `/v1/conversations/${encodeURIComponent(state.conversation)}/messages`;
    const response = await api(path, {
      method: "POST",
      body: JSON.stringify({ persona, content, stream: true }),
    });
    if (!response.ok) throw new Error(await errorText(response));
    await readStream(response, answer);
  } catch (error) {
    if (error instanceof AuthNeeded) {
      userDiv.remove();
      answer.div.remove();
      askToken(() => submit(text));
    } else {
      answer.fail(error.message);
    }
  }
}

async function submit(text) {
  if (state.busy) return;
  state.busy = true;
  $("send").disabled = true;
  setStatus("");
  try {
    await send(text);
  } finally {
    state.busy = false;
    $("send").disabled = false;
  }
}

function init() {
  if (!state.conversation) startConversation();
  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("input").value;
    if (!text.trim()) return;
    $("input").value = "";
    submit(text);
  });
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("chat-form").requestSubmit();
    }
  });
  $("new-conversation").addEventListener("click", startConversation);
  loadPersonas();
}

init();
