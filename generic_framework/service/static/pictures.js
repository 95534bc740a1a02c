// Pictures on the chat page (docs/design/0327-0329): attach (the button), paste or drop a JPEG
// or PNG into the message form; a thumbnail waits in the tray until the message is sent, then
// shows in the user's message. A large picture is scaled down in a canvas (longest side 1600 px,
// JPEG) so it fits the service's body limit. A restored conversation's pictures are fetched from
// /v1/conversations/{id}/pictures/{sha256} with the page's key and shown as data: URLs (the CSP
// allows img-src 'self' data: only). Loaded before app.js, which calls window.gfPictures.
"use strict";

(() => {
  const TYPES = new Set(["image/png", "image/jpeg"]);
  const MAX_IMAGES = 4; // BOT_MAX_IMAGES' default; the service says so if it is lower
  const SCALE_ABOVE = 700 * 1024; // bytes: a larger file is scaled down before it is sent
  const LONGEST = 1600;
  let pending = []; // data: URLs of the pictures waiting to be sent

  const byId = (id) => document.getElementById(id);

  function readAsDataUrl(blob) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(blob);
    });
  }

  function loaded(url) {
    return new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => resolve(img);
      img.onerror = () => reject(new Error("not a picture the browser can read"));
      img.src = url;
    });
  }

  async function scaled(url) {
    const img = await loaded(url);
    const ratio = Math.min(1, LONGEST / Math.max(img.naturalWidth, img.naturalHeight));
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(1, Math.round(img.naturalWidth * ratio));
    canvas.height = Math.max(1, Math.round(img.naturalHeight * ratio));
    canvas.getContext("2d").drawImage(img, 0, 0, canvas.width, canvas.height);
    return canvas.toDataURL("image/jpeg", 0.85);
  }

  function say(text) {
    const status = byId("status");
    if (status) status.textContent = text;
  }

  function thumb(url, label) {
    const img = document.createElement("img");
    img.className = "thumb";
    img.alt = label;
    img.src = url;
    return img;
  }

  function drawTray() {
    const tray = byId("attachments");
    tray.replaceChildren();
    pending.forEach((url, index) => {
      const item = document.createElement("span");
      item.className = "attachment";
      item.append(thumb(url, `Attached picture ${index + 1}`));
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove-picture";
      remove.textContent = "×";
      remove.setAttribute("aria-label", `Remove picture ${index + 1}`);
      remove.addEventListener("click", () => { pending.splice(index, 1); drawTray(); });
      item.append(remove);
      tray.append(item);
    });
    tray.hidden = pending.length === 0;
  }

  async function add(files) {
    for (const file of files) {
      if (!TYPES.has(file.type)) { say(`${file.name || "That file"} is not a JPEG or PNG picture.`); continue; }
      if (pending.length >= MAX_IMAGES) { say(`At most ${MAX_IMAGES} pictures in one message.`); break; }
      try {
        const url = await readAsDataUrl(file);
        pending.push(file.size > SCALE_ABOVE ? await scaled(url) : url);
      } catch (error) {
        say(`Could not read ${file.name || "the picture"}: ${error.message || error}`);
      }
    }
    drawTray();
  }

  function imageFiles(list) {
    return Array.from(list || []).filter((item) => item.kind === undefined || item.kind === "file")
      .map((item) => (item.getAsFile ? item.getAsFile() : item)).filter((f) => f && f.type.startsWith("image/"));
  }

  function wire() {
    const input = byId("picture-file");
    byId("attach").addEventListener("click", () => input.click());
    input.addEventListener("change", () => { add(Array.from(input.files)); input.value = ""; });
    byId("input").addEventListener("paste", (event) => {
      const files = imageFiles(event.clipboardData && event.clipboardData.items);
      if (files.length) { event.preventDefault(); add(files); }
    });
    const form = byId("chat-form");
    form.addEventListener("dragover", (event) => { event.preventDefault(); form.classList.add("dropping"); });
    form.addEventListener("dragleave", () => form.classList.remove("dropping"));
    form.addEventListener("drop", (event) => {
      event.preventDefault();
      form.classList.remove("dropping");
      add(imageFiles(event.dataTransfer && event.dataTransfer.files));
    });
  }

  function show(div, urls) {
    if (!urls.length) return;
    const row = document.createElement("div");
    row.className = "pictures";
    urls.forEach((url, index) => row.append(thumb(url, `Picture ${index + 1}`)));
    div.append(row);
  }

  window.gfPictures = {
    has: () => pending.length > 0,
    // The pictures waiting, handed over to the message being sent (the tray empties).
    take() {
      const taken = pending;
      pending = [];
      drawTray();
      return taken;
    },
    content(text, urls) {
      if (!urls.length) return text;
      const parts = text.trim() ? [{ type: "text", text }] : [];
      return parts.concat(urls.map((url) => ({ type: "image_url", image_url: { url } })));
    },
    show,
    // A restored turn's pictures: each fetched with the page's own request function.
    async restore(div, conversation, pictures, api) {
      const urls = [];
      for (const picture of pictures) {
        if (picture.url) { urls.push(null); continue; }
        const path = `/v1/conversations/${encodeURIComponent(conversation)}/pictures/${picture.sha256}`;
        const response = await api(path);
        urls.push(response.ok ? await readAsDataUrl(await response.blob()) : null);
      }
      show(div, urls.filter((url) => url));
    },
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", wire);
  else wire();
})();
