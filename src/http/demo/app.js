// upcommit's demo page: every upload goes through the browser client (`/demo/upcommit.js`, the
// file `clients/js/upcommit.js`): checksum → presign → direct upload to S3 (one PUT, the POST
// form, or a multipart upload with parallel, retried parts) → commit → show the image from its
// download URL. A multipart upload interrupted by a reload resumes when the same file is picked
// again. Plain JavaScript modules, no build step.
//
// Checksums: SHA-256 (crypto.subtle) of a file sent in one request, bound by the presigned PUT's
// signed headers or the POST policy; CRC64NVME of the whole file (the multipart upload's
// full-object checksum) and of each part (bound by each part URL). S3 refuses other bytes.
import { UpcommitClient, crc64nvme } from "/demo/upcommit.js";

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
  aborted: "The upload was cancelled.",
};

const state = { profiles: [], progressEvents: 0, crc64nvme, controller: null };
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

const token = () => $("token").value.trim();
// Two parts in flight at a time; every other setting is the client's default.
const client = new UpcommitClient({ token, concurrency: 2 });

async function api(method, path) {
  try {
    return { ok: true, body: await client.call(method, path) };
  } catch (e) {
    return { ok: false, error: e };
  }
}

function showProgress({ loaded, total }) {
  state.progressEvents += 1;
  const pct = total ? Math.round((loaded / total) * 100) : 100;
  $("progress").value = pct;
  $("progress-text").textContent = `Uploading… ${pct}% (${human(loaded)} of ${human(total)})`;
}

const STAGES = {
  checksumming: ["checksumming", "Computing the checksum…"],
  presigning: ["presigning", "Presigning…"],
  resuming: ["resuming", "Resuming the unfinished upload of this file…"],
  uploading: ["uploading", "Uploading to storage…"],
  completing: ["completing", "Completing the multipart upload…"],
  committing: ["committing", "Committing…"],
};

function onStage(stage, detail) {
  if (!STAGES[stage]) return;
  const [kind, text] = STAGES[stage];
  setStatus(kind, text);
  if (stage === "checksumming") $("progress-text").textContent = "Computing the checksum…";
  if (stage === "presigning") $("progress-text").textContent = "Asking for an upload URL…";
  if (stage === "resuming") state.resumed = detail.upload_id;
  if (stage === "uploading" && detail && detail.held) state.heldParts = detail.held;
}

async function showImage(handle) {
  // The size the server read from the image's header at commit, as displayed.
  $("dimensions").textContent = handle.image ? `${handle.image.width} × ${handle.image.height} px` : "";
  if (!handle.content_type.startsWith("image/")) return;
  const resp = await api("GET", `/v1/files/${handle.id}/download-url`);
  if (!resp.ok) return;
  const img = $("preview");
  img.onload = () => {
    img.style.display = "block";
    img.dataset.loaded = "true";
  };
  img.src = resp.body.url;
  await showRendition(handle);
}

// The profile's first variant (docs/images.md), rendered by the service into cache/ and shown
// from its short-lived URL: the same bucket origin the page's CSP already allows for images.
async function showRendition(handle) {
  const profile = state.profiles.find((p) => p.name === handle.profile);
  const name = profile && profile.variants && profile.variants[0];
  if (!name) return;
  let r;
  try {
    r = await client.variantUrl(handle.id, name);
  } catch (e) {
    $("rendition").textContent = `${name}: not rendered (${e.code})`;
    return;
  }
  state.rendition = r;
  $("rendition").textContent = `${name}: ${r.width} × ${r.height} px, ${human(r.size)} ${r.content_type}${r.cached ? " (cached)" : ""}`;
  const img = $("thumbnail");
  img.onload = () => {
    img.style.display = "block";
    img.dataset.loaded = "true";
  };
  img.src = r.url;
}

async function upload() {
  const file = $("file").files[0];
  if (!file) return fail("no_file", "Choose a file first.");
  if (!token()) return fail("unauthorized", "Paste or mint a token first.");
  $("upload-button").disabled = true;
  $("cancel-button").disabled = false;
  $("handle").hidden = true;
  $("preview").style.display = "none";
  $("thumbnail").style.display = "none";
  delete $("thumbnail").dataset.loaded;
  $("rendition").textContent = "";
  $("dimensions").textContent = "";
  $("progress").value = 0;
  $("checksum").textContent = "";
  state.resumed = null;
  state.heldParts = [];
  const profile = $("profile").value;
  const controller = new AbortController();
  state.controller = controller;
  let handle;
  try {
    handle = await client.upload(file, {
      profile,
      method: $("method").value,
      signal: controller.signal,
      onProgress: showProgress,
      onStage,
      onChecksum: ({ checksum, parts }) => {
        state.checksum = checksum;
        state.partChecksums = parts;
        $("checksum").textContent = checksum
          ? `${checksum.algorithm} ${checksum.value}`
          : "no checksum (this page is not in a secure context)";
      },
    });
  } catch (e) {
    $("cancel-button").disabled = true;
    const code = e.code || "network";
    let detail = e.message;
    if (code === "size_too_large") {
      const p = state.profiles.find((x) => x.name === profile);
      detail = p ? `The limit is ${human(p.max_size)}; this file is ${human(file.size)}.` : "";
    } else if (code === "quota_exceeded") {
      detail = e.retryAfter ? `It renews in about ${Math.ceil(e.retryAfter / 3600)} h.` : "";
    } else if (code === "storage_refused") {
      detail = e.detail;
    }
    $("progress-text").textContent = ["presigning", "checksumming"].includes($("status").dataset.state)
      ? "Nothing was uploaded."
      : "The upload did not finish.";
    return fail(code, detail);
  }
  $("cancel-button").disabled = true;
  $("progress").value = 100;
  $("progress-text").textContent = `Uploaded ${human(file.size)}.`;
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
  $("cancel-button").addEventListener("click", () => state.controller && state.controller.abort());
  document.body.dataset.ready = "true";
}

init();
