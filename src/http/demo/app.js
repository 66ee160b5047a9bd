// upcommit's demo page: checksum → presign → direct upload to S3 (XHR, for upload progress
// events; one PUT, the POST form, or a multipart upload) → commit → show the image from its
// download URL. Plain JavaScript, no build step.
//
// Checksums: SHA-256 (crypto.subtle) of a file sent in one request, bound by the presigned PUT's
// signed headers or the POST policy; CRC64NVME of the whole file (the multipart upload's
// full-object checksum) and of each part (bound by each part URL). S3 refuses other bytes.
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
  checksum_mismatch: "Storage holds bytes with another checksum than the one computed here. Start again.",
  checksum_required: "This profile requires a checksum, and this browser cannot compute one here (a secure context is needed).",
  part_etag_mismatch: "A part changed during the completion. Start again.",
};

// CRC-64/NVME (reflected; polynomial 0xAD93D23594C93659, reflected 0x9A6C9329AC4BC9B5; init and
// final xor all ones; check value of "123456789" 0xAE8B14860A799888) in two 32-bit halves,
// table-driven, slicing by 8 so 10 MB take some tens of milliseconds.
const CRC64 = (() => {
  const POLY_HI = 0x9a6c9329;
  const POLY_LO = 0xac4bc9b5;
  const hi = new Uint32Array(256 * 8);
  const lo = new Uint32Array(256 * 8);
  for (let n = 0; n < 256; n += 1) {
    let h = 0;
    let l = n;
    for (let k = 0; k < 8; k += 1) {
      const bit = l & 1;
      l = ((l >>> 1) | ((h & 1) << 31)) >>> 0;
      h >>>= 1;
      if (bit) {
        h = (h ^ POLY_HI) >>> 0;
        l = (l ^ POLY_LO) >>> 0;
      }
    }
    hi[n] = h;
    lo[n] = l;
  }
  // Table t[k][n]: the CRC of byte n followed by k zero bytes.
  for (let k = 1; k < 8; k += 1) {
    for (let n = 0; n < 256; n += 1) {
      const ph = hi[(k - 1) * 256 + n];
      const pl = lo[(k - 1) * 256 + n];
      const i = pl & 0xff;
      hi[k * 256 + n] = (ph >>> 8) ^ hi[i];
      lo[k * 256 + n] = (((pl >>> 8) | (ph << 24)) ^ lo[i]) >>> 0;
    }
  }
  return { hi, lo };
})();

// An incremental CRC-64/NVME: update(Uint8Array)…, then base64() of the big-endian digest.
function crc64nvme() {
  let h = 0xffffffff;
  let l = 0xffffffff;
  const { hi, lo } = CRC64;
  return {
    update(bytes) {
      let i = 0;
      const n = bytes.length;
      for (; i + 8 <= n; i += 8) {
        const a = (l ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24))) >>> 0;
        const b = (h ^ (bytes[i + 4] | (bytes[i + 5] << 8) | (bytes[i + 6] << 16) | (bytes[i + 7] << 24))) >>> 0;
        const t0 = 7 * 256 + (a & 0xff), t1 = 6 * 256 + ((a >>> 8) & 0xff);
        const t2 = 5 * 256 + ((a >>> 16) & 0xff), t3 = 4 * 256 + (a >>> 24);
        const t4 = 3 * 256 + (b & 0xff), t5 = 2 * 256 + ((b >>> 8) & 0xff);
        const t6 = 256 + ((b >>> 16) & 0xff), t7 = b >>> 24;
        h = (hi[t0] ^ hi[t1] ^ hi[t2] ^ hi[t3] ^ hi[t4] ^ hi[t5] ^ hi[t6] ^ hi[t7]) >>> 0;
        l = (lo[t0] ^ lo[t1] ^ lo[t2] ^ lo[t3] ^ lo[t4] ^ lo[t5] ^ lo[t6] ^ lo[t7]) >>> 0;
      }
      for (; i < n; i += 1) {
        const t = (l ^ bytes[i]) & 0xff;
        l = (((l >>> 8) | (h << 24)) ^ lo[t]) >>> 0;
        h = ((h >>> 8) ^ hi[t]) >>> 0;
      }
      return this;
    },
    base64() {
      const out = new Uint8Array(8);
      const view = new DataView(out.buffer);
      view.setUint32(0, (h ^ 0xffffffff) >>> 0);
      view.setUint32(4, (l ^ 0xffffffff) >>> 0);
      return toBase64(out);
    },
  };
}

function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 1) s += String.fromCharCode(bytes[i]);
  return btoa(s);
}

// The checksum to declare for `file`: SHA-256 for one request, CRC64NVME for multipart.
// Null where the browser offers no crypto.subtle (an insecure context) for SHA-256.
async function checksumOf(file, multipart) {
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (multipart) return { algorithm: "CRC64NVME", value: crc64nvme().update(bytes).base64() };
  if (!(window.crypto && crypto.subtle)) return null;
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return { algorithm: "SHA256", value: toBase64(new Uint8Array(digest)) };
}

const state = { profiles: [], progressEvents: 0, crc64nvme };
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

function showProgress(loaded, total) {
  state.progressEvents += 1;
  const pct = Math.round((loaded / total) * 100);
  $("progress").value = pct;
  $("progress-text").textContent = `Uploading… ${pct}% (${human(loaded)} of ${human(total)})`;
}

// The direct upload to S3, with progress. Resolves to {ok, code, detail}.
function sendToStorage(presigned, file) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) showProgress(e.loaded, e.total);
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

// One part to its presigned URL, with every header as given. Resolves to {ok, etag} or
// {ok: false, code, detail}; onProgress(bytes sent of this part).
function sendPart(part, blob, onProgress) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        resolve({ ok: true, etag: xhr.getResponseHeader("ETag") });
      } else {
        const m = /<Code>([^<]+)<\/Code>/.exec(xhr.responseText || "");
        resolve({ ok: false, code: "storage_refused", detail: m ? m[1] : `HTTP ${xhr.status}` });
      }
    };
    xhr.onerror = () => resolve({ ok: false, code: "network" });
    xhr.ontimeout = () => resolve({ ok: false, code: "network" });
    xhr.onabort = () => resolve({ ok: false, code: "network" });
    xhr.open("PUT", part.url);
    for (const [k, v] of Object.entries(part.headers || {})) {
      if (!FORBIDDEN.has(k.toLowerCase())) xhr.setRequestHeader(k, v);
    }
    xhr.send(blob);
  });
}

// A multipart upload: each part's CRC64NVME goes with its part URL request (the upload declared
// the whole file's at presign), parts go two at a time, then the completion. Resolves like
// sendToStorage; on failure the upload is aborted so its parts do not linger.
async function sendParts(presigned, file) {
  const { part_size: size, part_count: count } = presigned.multipart;
  const blob = (n) => file.slice((n - 1) * size, Math.min(n * size, file.size));
  const numbers = Array.from({ length: count }, (_, i) => i + 1);
  const checksums = [];
  for (const n of numbers) {
    checksums.push(crc64nvme().update(new Uint8Array(await blob(n).arrayBuffer())).base64());
  }
  state.partChecksums = checksums;
  const failed = async (r) => {
    await api("DELETE", `/v1/uploads/${presigned.upload_id}`);
    return r;
  };
  const urls = await api("POST", `/v1/uploads/${presigned.upload_id}/parts`, { part_numbers: numbers, checksums });
  if (!urls.ok) return failed({ ok: false, code: errorCode(urls), detail: urls.body && urls.body.error && urls.body.error.message });
  const sent = new Map();
  const done = [];
  const queue = [...urls.body.parts];
  let refused = null;
  const worker = async () => {
    while (queue.length && !refused) {
      const part = queue.shift();
      const r = await sendPart(part, blob(part.part_number), (loaded) => {
        sent.set(part.part_number, loaded);
        let total = 0;
        for (const v of sent.values()) total += v;
        showProgress(Math.min(total, file.size), file.size);
      });
      if (!r.ok) refused = r;
      else done.push({ part_number: part.part_number, etag: r.etag });
    }
  };
  await Promise.all([worker(), worker()]);
  if (refused) return failed(refused);
  done.sort((a, b) => a.part_number - b.part_number);
  const completed = await api("POST", `/v1/uploads/${presigned.upload_id}/complete`, { parts: done });
  if (!completed.ok) {
    return failed({ ok: false, code: errorCode(completed), detail: completed.body && completed.body.error && completed.body.error.message });
  }
  $("progress").value = 100;
  $("progress-text").textContent = `Uploaded ${human(file.size)} in ${count} parts.`;
  return { ok: true };
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
  $("checksum").textContent = "";
  const multipart = $("method").value === "MULTIPART";
  setStatus("checksumming", "Computing the checksum…");
  $("progress-text").textContent = "Computing the checksum…";
  const checksum = await checksumOf(file, multipart);
  state.checksum = checksum;
  $("checksum").textContent = checksum ? `${checksum.algorithm} ${checksum.value}` : "no checksum (this page is not in a secure context)";
  $("progress-text").textContent = "Asking for an upload URL…";
  setStatus("presigning", "Presigning…");

  const profile = $("profile").value;
  const request = {
    profile,
    content_type: file.type || "application/octet-stream",
    size: file.size,
    filename: file.name,
  };
  if (multipart) request.multipart = true;
  else request.method = $("method").value;
  if (checksum) request.checksum = checksum;
  const presign = await api("POST", "/v1/uploads", request);
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
  const sent = presign.body.method === "MULTIPART"
    ? await sendParts(presign.body, file)
    : await sendToStorage(presign.body, file);
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
  if (handle.checksum) $("checksum").textContent = `${handle.checksum.algorithm} ${handle.checksum.value} (verified by storage)`;
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
