// upcommit's demo page: presign → direct upload to S3 (XHR, for upload progress events) →
// commit → show the image from its download URL. Plain JavaScript, no build step.
"use strict";

const $ = (id) => document.getElementById(id);

// What a person reads for each stable error code. Unknown codes fall back to the server's
// own message.
const MESSAGES = {
  unauthorized: "Your token was refused (expired or not from this server). Paste a fresh one or mint one.",
  quota_exceeded: "You have reached today's upload limit.",
  rate_limited: "Too many uploads at once. Wait a moment and try again.",
  content_type_not_allowed: "This kind of file can't be uploaded with this profile.",
  content_type_required: "The browser could not tell this file's type. Try a file with a usual extension.",
  content_type_invalid: "The browser reported an unusable file type.",
  size_too_large: "This file is too large for this profile.",
  size_invalid: "This file is empty.",
  filename_too_long: "The file name is too long. Rename the file and try again.",
  filename_invalid: "The file name has characters that can't be used. Rename the file and try again.",
  profile_unknown: "The server has no such upload profile.",
  multipart_required: "This file is too large for a single upload.",
  object_not_uploaded: "The file did not reach storage. Try the upload again.",
  upload_expired: "The upload took too long and expired. Start again.",
  content_type_mismatch: "Storage holds a different type than the one declared. Start again.",
  size_mismatch: "Storage holds a different size than the one declared. Start again.",
  content_mismatch: "The file's content does not match its type.",
  object_changed: "The file changed during the commit. Start again.",
  upload_not_found: "The server does not know this upload any more. Start again.",
  commit_in_progress: "The commit is still running. Try again in a moment.",
  service_unavailable: "The service is having trouble. Try again shortly.",
  request_timeout: "The service took too long to answer. Try again.",
  network: "The connection dropped during the upload. Check your network and try again.",
  storage_refused: "Storage refused the upload.",
};

const state = { profiles: [], progressEvents: 0 };
// Read by the browser test.
window.upcommitDemo = state;

function setStatus(kind, text, code) {
  $("status").dataset.state = kind;
  $("status").textContent = text;
  $("error-code").textContent = code ? `code: ${code}` : "";
}

function fail(code, detail) {
  let text = MESSAGES[code] || detail || `The request failed (${code}).`;
  if (code === "quota_exceeded" && detail) text += ` ${detail}`;
  if (code === "size_too_large" && detail) text += ` ${detail}`;
  setStatus("error", text, code);
  $("upload-button").disabled = false;
}

function human(bytes) {
  if (bytes >= 1048576) return `${(bytes / 1048576).toFixed(1)} MB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${bytes} B`;
}

// A JSON API call; resolves to {ok, status, body, headers}. Network failures resolve too.
async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${$("token").value.trim()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  try {
    const resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await resp.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = null; }
    return { ok: resp.ok, status: resp.status, body: parsed, headers: resp.headers };
  } catch (_) {
    return { ok: false, status: 0, body: null, headers: new Headers() };
  }
}

function errorCode(resp) {
  if (resp.status === 0) return "network";
  return (resp.body && resp.body.error && resp.body.error.code) || `http_${resp.status}`;
}

// Browsers refuse to set these; the browser sends its own.
const FORBIDDEN = new Set(["content-length", "host", "connection"]);

// The direct upload to S3, with progress. Resolves to {ok, code, detail}.
function sendToStorage(presigned, file) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.upload.onprogress = (e) => {
      if (!e.lengthComputable) return;
      state.progressEvents += 1;
      const pct = Math.round((e.loaded / e.total) * 100);
      $("progress").value = pct;
      $("progress-text").textContent = `Uploading… ${pct}% (${human(e.loaded)} of ${human(e.total)})`;
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        $("progress").value = 100;
        $("progress-text").textContent = `Uploaded ${human(file.size)}.`;
        resolve({ ok: true });
      } else {
        const m = /<Code>([^<]+)<\/Code>/.exec(xhr.responseText || "");
        resolve({ ok: false, code: "storage_refused", detail: m ? m[1] : `HTTP ${xhr.status}` });
      }
    };
    xhr.onerror = () => resolve({ ok: false, code: "network" });
    xhr.ontimeout = () => resolve({ ok: false, code: "network" });
    xhr.onabort = () => resolve({ ok: false, code: "network" });
    if (presigned.method === "PUT") {
      xhr.open("PUT", presigned.url);
      for (const [k, v] of Object.entries(presigned.headers || {})) {
        if (!FORBIDDEN.has(k.toLowerCase())) xhr.setRequestHeader(k, v);
      }
      xhr.send(file);
    } else {
      const form = new FormData();
      for (const [k, v] of Object.entries(presigned.fields || {})) form.append(k, v);
      form.append("file", file); // the file goes last: S3 ignores fields after it
      xhr.open("POST", presigned.url);
      xhr.send(form);
    }
  });
}

// Commit is idempotent: retry what may not have reached the server or is still running.
async function commitWithRetry(key) {
  const transient = new Set(["network", "commit_in_progress", "service_unavailable", "request_timeout"]);
  let resp;
  for (let attempt = 0; attempt < 4; attempt += 1) {
    resp = await api("POST", "/v1/files", { key });
    if (resp.ok || !transient.has(errorCode(resp)) && resp.status < 500) return resp;
    await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
  }
  return resp;
}

async function showImage(handle) {
  if (!handle.content_type.startsWith("image/")) return;
  const resp = await api("GET", `/v1/files/${handle.id}/download-url`);
  if (!resp.ok) return;
  const img = $("preview");
  img.onload = () => {
    img.style.display = "block";
    img.dataset.loaded = "true";
  };
  img.src = resp.body.url;
}

async function upload() {
  const file = $("file").files[0];
  if (!file) return fail("no_file", "Choose a file first.");
  if (!$("token").value.trim()) return fail("unauthorized", "Paste or mint a token first.");
  $("upload-button").disabled = true;
  $("handle").hidden = true;
  $("preview").style.display = "none";
  $("progress").value = 0;
  $("progress-text").textContent = "Asking for an upload URL…";
  setStatus("presigning", "Presigning…");

  const profile = $("profile").value;
  const presign = await api("POST", "/v1/uploads", {
    profile,
    content_type: file.type || "application/octet-stream",
    size: file.size,
    filename: file.name,
    method: $("method").value,
  });
  if (!presign.ok) {
    const code = errorCode(presign);
    let detail = presign.body && presign.body.error ? presign.body.error.message : "";
    if (code === "size_too_large") {
      const p = state.profiles.find((x) => x.name === profile);
      detail = p ? `The limit is ${human(p.max_size)}; this file is ${human(file.size)}.` : "";
    }
    if (code === "quota_exceeded") {
      const after = Number(presign.headers.get("Retry-After"));
      detail = after ? `It renews in about ${Math.ceil(after / 3600)} h.` : "";
    }
    $("progress-text").textContent = "Nothing was uploaded.";
    return fail(code, detail);
  }

  setStatus("uploading", "Uploading to storage…");
  const sent = await sendToStorage(presign.body, file);
  if (!sent.ok) {
    $("progress-text").textContent = "The upload did not finish.";
    return fail(sent.code, sent.detail);
  }

  setStatus("committing", "Committing…");
  const committed = await commitWithRetry(presign.body.key);
  if (!committed.ok) {
    return fail(errorCode(committed), committed.body && committed.body.error && committed.body.error.message);
  }
  const handle = committed.body;
  $("handle").textContent = JSON.stringify(handle, null, 2);
  $("handle").hidden = false;
  $("status").dataset.fileId = handle.id;
  setStatus("committed", `Committed as ${handle.key}`);
  $("upload-button").disabled = false;
  await showImage(handle);
}

async function mint() {
  const resp = await fetch("/demo/token", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ sub: $("sub").value.trim() }),
  });
  const body = await resp.json().catch(() => null);
  if (!resp.ok) return fail((body && body.error && body.error.code) || `http_${resp.status}`);
  $("token").value = body.token;
  setStatus("idle", `Minted a token for ${$("sub").value.trim()}.`);
}

async function init() {
  const resp = await fetch("/demo/config");
  const cfg = await resp.json();
  state.profiles = cfg.profiles;
  for (const p of cfg.profiles) {
    const opt = document.createElement("option");
    opt.value = p.name;
    opt.textContent = `${p.name} (${p.content_types.join(", ")}; up to ${human(p.max_size)})`;
    $("profile").appendChild(opt);
  }
  $("mint").hidden = !cfg.mint_tokens;
  $("mint-button").addEventListener("click", mint);
  $("upload-button").addEventListener("click", upload);
  document.body.dataset.ready = "true";
}

init();
