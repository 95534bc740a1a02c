// The Memory panel: what the chosen persona keeps about the signed-in user (docs/design/0332).
// Read, erase one, add one, on GET/POST/DELETE /v1/memories. It uses app.js's helpers (api,
// getJson, problemOf, handle, state, $) and reloads when the persona changes, when the panel is
// opened, and after each turn (a turn may have remembered or forgotten something).

function memoryPath(path) {
  // An admin looking at another user's chats sees that user's memory too.
  if (!state.actingFor) return path;
  return path + (path.includes("?") ? "&" : "?") + "user=" + encodeURIComponent(state.actingFor);
}

function memoryNote(text) {
  const note = $("memory-note");
  note.textContent = text || "";
  note.hidden = !text;
}

function memoryItem(memory) {
  const item = document.createElement("li");
  item.dataset.id = memory.id;
  const text = document.createElement("span");
  text.className = "memory-text";
  text.textContent = memory.text;
  const erase = document.createElement("button");
  erase.type = "button";
  erase.className = "memory-delete";
  erase.textContent = "Delete";
  erase.setAttribute("aria-label", "Forget: " + memory.text);
  erase.addEventListener("click", () => forgetMemory(memory.id).catch((e) => handle(e)));
  item.append(text, erase);
  return item;
}

async function loadMemories() {
  const persona = $("persona").value;
  $("memory-persona").textContent = persona ? " (" + persona + ")" : "";
  if (!persona || !$("memory-panel").open) return;
  const body = await getJson(memoryPath("/v1/memories?persona=" + encodeURIComponent(persona)));
  const list = $("memories");
  list.replaceChildren(...body.data.map(memoryItem));
  $("no-memories").hidden = body.data.length > 0;
}

async function forgetMemory(id) {
  const response = await api(memoryPath("/v1/memories/" + encodeURIComponent(id)), {
    method: "DELETE",
  });
  if (!response.ok && response.status !== 404) throw await problemOf(response);
  memoryNote("");
  await loadMemories();
}

async function addMemory(event) {
  event.preventDefault();
  const text = $("memory-input").value.trim();
  if (!text) return;
  const response = await api(memoryPath("/v1/memories"), {
    method: "POST",
    body: JSON.stringify({ persona: $("persona").value, text }),
  });
  if (!response.ok) {
    // The service's own words say why a fact is refused (too long, a key, the memory full).
    let message = "The fact was not kept.";
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) message = String(body.error.message);
    } catch (_) { /* not JSON */ }
    memoryNote(message);
    return;
  }
  $("memory-input").value = "";
  memoryNote("");
  await loadMemories();
}

function wireMemory() {
  const reload = () => loadMemories().catch((e) => handle(e));
  $("memory-panel").addEventListener("toggle", reload);
  $("persona").addEventListener("change", () => { memoryNote(""); reload(); });
  $("memory-form").addEventListener("submit", (event) => addMemory(event).catch((e) => handle(e)));
  // A turn ends when the page stops being busy: what it kept is listed at once.
  new MutationObserver(() => {
    if (document.body.dataset.busy === "false") reload();
  }).observe(document.body, { attributes: true, attributeFilter: ["data-busy"] });
}

wireMemory();
