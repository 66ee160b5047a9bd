// upcommit's browser client: presign → upload straight to S3 (one PUT, the POST form, or a
// multipart upload with parallel parts) → commit. An ES module with no build step and no
// dependencies; JSDoc types for editors and `tsc --checkJs`, from which `npm pack` generates
// upcommit.d.ts for the npm package `upcommit-client` (package.json beside this file).
//
//   import { UpcommitClient } from "upcommit-client";   // or from "./upcommit.js"
//   const client = new UpcommitClient({ baseUrl: "https://uploads.example.com", token: () => getToken() });
//   const controller = new AbortController();
//   const handle = await client.upload(file, {
//     profile: "image",
//     signal: controller.signal,
//     onProgress: ({ loaded, total }) => bar.value = loaded / total,
//   });
//
// What it retries (docs/api.md, "Retrying a commit"; docs/clients.md):
// - each part of a multipart upload, and a single PUT or POST form, on a dropped connection, a
//   timeout or a 5xx from S3, with exponential backoff and jitter (`retries`, default 4); a part
//   whose URL S3 refuses as expired (403) gets a fresh URL first;
// - part URLs, the part listing, the completion, the abort and the commit on no answer and on
//   503 (`service_unavailable`, `request_timeout`, `commit_in_progress`,
//   `completion_in_progress`, `identity_provider_unavailable`), waiting `Retry-After` when given;
//   the commit keeps retrying (capped at a minute between tries) until `commitTimeoutMs`;
// - a presign only on 503 and 429 `rate_limited` (nothing was charged): a presign that got no
//   answer may have charged the quota, so it is not repeated.
// Any other 4xx is final: it would answer the same.
//
// Resume: a multipart upload's id, tmp key and whole-file checksum are kept in `localStorage`
// under the file's name, size and lastModified (and the profile) until the commit answers. When
// the same file is uploaded again (after a page reload, the file picked again) the client lists
// the parts S3 holds (`GET /v1/uploads/{id}/parts`) and sends only the missing ones. A single
// PUT or POST keeps its tmp key there once the bytes are stored, so a reload before the commit
// answers commits that key instead of uploading again.
/**
 * @typedef {{algorithm: "SHA256" | "CRC32C" | "CRC64NVME", value: string}} Checksum
 * @typedef {{id: string, upload_id: string, key: string, size: number, content_type: string,
 *   etag: string, profile: string, created_by: string, created_at: string, status: string,
 *   original_filename?: string, checksum?: Checksum, expires_at?: string}} FileHandle
 * @typedef {{profile: string, content_type?: string | null, size?: number | null,
 *   filename?: string | null, method?: "PUT" | "POST" | null, multipart?: boolean | null,
 *   checksum?: Checksum | null}} PresignRequest
 * @typedef {{upload_id: string, key: string, method: "PUT" | "POST" | "MULTIPART", url?: string,
 *   headers?: Record<string, string>, fields?: Record<string, string>,
 *   multipart?: {part_size: number, part_count: number}, expires_at: string, max_size: number,
 *   checksum?: Checksum}} Presigned
 * @typedef {{variant: string, url: string, width: number, height: number,
 *   content_type: "image/jpeg" | "image/webp" | "image/avif", size: number, expires_in: number, cached: boolean}} Rendition
 * @typedef {{id: string, status: number, rendition?: Rendition,
 *   error?: {code: string, message: string, retry_after?: number}}} RenditionEntry
 * @typedef {{part_number: number, url: string, headers: Record<string, string>, size: number}} PartUrl
 * @typedef {{upload_id: string, expires_at: string, parts: PartUrl[]}} PartUrls
 * @typedef {{upload_id: string, state: "open" | "completed", part_size: number, part_count: number,
 *   expires_at: string, next_after?: number, parts: {part_number: number, etag: string, size: number}[]}} PartListing
 * @typedef {{loaded: number, total: number}} Progress
 * @typedef {"checksumming" | "presigning" | "resuming" | "uploading" | "completing" | "committing" | "committed"} Stage
 * @typedef {{v: 1, upload_id: string, key: string, method: string, size: number,
 *   checksum: Checksum | null, filename?: string | null, part_size?: number, part_count?: number,
 *   stored?: boolean, saved_at: number}} ResumeRecord
 */

/**
 * @typedef {object} UploadOptions
 * @property {string} profile The upload profile (`image`, `recording`, …).
 * @property {"PUT" | "POST" | "MULTIPART"} [method] How to send the bytes; default PUT, or
 *   MULTIPART above the client's `multipartThreshold`.
 * @property {string} [contentType] Default: the file's type.
 * @property {string} [filename] Default: the file's name.
 * @property {AbortSignal} [signal] Aborting stops every request; a multipart upload is aborted
 *   on the server too (`DELETE /v1/uploads/{id}`) and its resume record dropped.
 * @property {(p: Progress) => void} [onProgress] Bytes sent to storage so far, of the total
 *   (parts already stored count as sent when resuming).
 * @property {(stage: Stage, detail?: object) => void} [onStage]
 * @property {(c: {checksum: Checksum | null, parts?: string[]}) => void} [onChecksum] The
 *   checksum declared (and, for multipart, each part's).
 * @property {(e: {part_number: number, attempt: number, error: UpcommitError}) => void} [onRetry]
 * @property {boolean} [resume] Look for and keep a resume record (default true).
 */

/** An upload that did not succeed: `code` is the server's stable code, or one of the client's
 * own: `network` (no answer), `storage_refused` (S3 refused the bytes; `detail` holds S3's code),
 * `aborted`, `file_changed` (the file picked again is not the one being resumed). */
export class UpcommitError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{status?: number, retryAfter?: number | null, detail?: string}} [extra]
   */
  constructor(code, message, extra = {}) {
    super(message);
    this.name = "UpcommitError";
    this.code = code;
    this.status = extra.status ?? 0;
    this.retryAfter = extra.retryAfter ?? null;
    this.detail = extra.detail ?? "";
  }
}

// ---------------------------------------------------------------------------------------------
// Checksums

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

/** @typedef {{update(bytes: Uint8Array): Crc64, base64(): string}} Crc64 */

/** An incremental CRC-64/NVME: `update(bytes)`…, then `base64()` of the big-endian digest.
 * @returns {Crc64} */
export function crc64nvme() {
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

/** @param {Uint8Array} bytes */
function toBase64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 1) s += String.fromCharCode(bytes[i]);
  return btoa(s);
}

/** SHA-256 of a whole blob, or null where `crypto.subtle` is missing (an insecure context).
 * @param {Blob} blob @returns {Promise<Checksum | null>} */
export async function sha256Of(blob) {
  if (!(globalThis.crypto && crypto.subtle)) return null;
  const digest = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
  return { algorithm: "SHA256", value: toBase64(new Uint8Array(digest)) };
}

/** The whole blob's CRC64NVME and each part's, read one part at a time.
 * @param {Blob} blob @param {number} partSize
 * @returns {Promise<{whole: Checksum, parts: string[]}>} */
export async function crc64nvmeParts(blob, partSize) {
  const whole = crc64nvme();
  const parts = [];
  for (let start = 0; start < blob.size; start += partSize) {
    const bytes = new Uint8Array(await blob.slice(start, Math.min(start + partSize, blob.size)).arrayBuffer());
    whole.update(bytes);
    parts.push(crc64nvme().update(bytes).base64());
  }
  return { whole: { algorithm: "CRC64NVME", value: whole.base64() }, parts };
}

// ---------------------------------------------------------------------------------------------
// The client

const MiB = 1024 * 1024;
// Browsers refuse to set these; the browser sends its own.
const FORBIDDEN = new Set(["content-length", "host", "connection"]);
// 503 codes (and no answer at all) mean: the same call may succeed later.
const PERMANENT_PART_FAILURES = new Set(["BadDigest", "InvalidDigest", "EntityTooLarge", "EntityTooSmall", "InvalidPart"]);

/**
 * @typedef {object} ClientOptions
 * @property {string} [baseUrl] The API's origin (default: this page's).
 * @property {string | (() => string | Promise<string>)} token The bearer token, or a function
 *   asked before every API call (to refresh it).
 * @property {number} [concurrency] Parts in flight at once (default 4).
 * @property {number} [retries] Retries of one part, PUT or POST (default 4).
 * @property {number} [retryBaseMs] First backoff (default 500 ms; doubles, with jitter, capped at 30 s).
 * @property {number} [multipartThreshold] Files above this go multipart when `method` is not
 *   given (default 100 MiB, the server's default).
 * @property {boolean} [checksums] Declare checksums (default true): SHA-256 for one request,
 *   CRC64NVME of the whole file and of each part for multipart.
 * @property {number} [commitTimeoutMs] How long the commit keeps retrying (default 24 h, the
 *   server's default commit window).
 * @property {Storage | null} [storage] Where resume records live (default `localStorage`).
 * @property {string} [storagePrefix] Default `upcommit:`.
 */

export class UpcommitClient {
  /** @param {ClientOptions} options */
  constructor(options) {
    this.baseUrl = (options.baseUrl ?? "").replace(/\/+$/, "");
    this.token = options.token;
    this.concurrency = Math.max(1, options.concurrency ?? 4);
    this.retries = Math.max(0, options.retries ?? 4);
    this.retryBaseMs = options.retryBaseMs ?? 500;
    this.multipartThreshold = options.multipartThreshold ?? 100 * MiB;
    this.checksums = options.checksums ?? true;
    this.commitTimeoutMs = options.commitTimeoutMs ?? 24 * 3600 * 1000;
    /** @type {Storage | null} */
    this.storage = options.storage !== undefined ? options.storage : (globalThis.localStorage ?? null);
    this.storagePrefix = options.storagePrefix ?? "upcommit:";
  }

  // --- API calls --------------------------------------------------------------------------

  /**
   * One API call. Resolves with the parsed body of a 2xx (`T`: the answer's type, as
   * `openapi.yaml` documents it); throws UpcommitError otherwise (`network` when there was no
   * answer).
   * @template [T=unknown]
   * @param {string} method @param {string} path @param {unknown} [body] @param {AbortSignal} [signal]
   * @returns {Promise<T>}
   */
  async call(method, path, body, signal) {
    const token = typeof this.token === "function" ? await this.token() : this.token;
    /** @type {Record<string, string>} */
    const headers = { Authorization: `Bearer ${token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let resp;
    try {
      resp = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw aborted();
      throw new UpcommitError("network", `no answer from the service (${e})`);
    }
    const text = await resp.text().catch(() => "");
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch (_) { parsed = null; }
    if (resp.ok) return parsed;
    const error = parsed && parsed.error;
    const retryAfter = Number(resp.headers.get("Retry-After")) || null;
    throw new UpcommitError(error?.code || `http_${resp.status}`, error?.message || `HTTP ${resp.status}`, {
      status: resp.status,
      retryAfter,
    });
  }

  /**
   * An idempotent API call, repeated on no answer and on 503 (Retry-After or backoff).
   * @template [T=unknown]
   * @param {string} method @param {string} path @param {unknown} body
   * @param {AbortSignal | undefined} signal @param {number} deadline epoch ms
   * @returns {Promise<T>}
   */
  async callWithRetry(method, path, body, signal, deadline) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.call(method, path, body, signal);
      } catch (e) {
        if (!(e instanceof UpcommitError) || !isTransient(e)) throw e;
        const wait = e.retryAfter ? e.retryAfter * 1000 : backoff(attempt, 1000, 60_000);
        if (Date.now() + wait > deadline) throw e;
        await sleep(wait, signal);
      }
    }
  }

  /**
   * Presign. Repeated only on 503 and 429 `rate_limited` (nothing was charged).
   * @param {PresignRequest} request @param {AbortSignal} [signal] @returns {Promise<Presigned>}
   */
  async presign(request, signal) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.call("POST", "/v1/uploads", request, signal);
      } catch (e) {
        const again = e instanceof UpcommitError && (e.status === 503 || e.code === "rate_limited");
        if (!again || attempt >= this.retries) throw e;
        await sleep(e.retryAfter ? e.retryAfter * 1000 : backoff(attempt, 1000, 60_000), signal);
      }
    }
  }

  /**
   * Commit a tmp key (idempotent: 201 the first time, 200 with the same handle after), retried
   * per docs/api.md until `commitTimeoutMs`.
   * @param {string} key @param {{signal?: AbortSignal}} [options] @returns {Promise<FileHandle>}
   */
  commit(key, options = {}) {
    return this.callWithRetry("POST", "/v1/files", { key }, options.signal, Date.now() + this.commitTimeoutMs);
  }

  /**
   * A short-lived GET URL of one of a file's renditions (its profile's variant `name`,
   * docs/images.md), rendered first when it is not cached yet. Retried on 503 (`render_busy`,
   * an outage) after `Retry-After`, up to `retries` times.
   * @param {string} fileId @param {string} name @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<Rendition>}
   */
  variantUrl(fileId, name, options = {}) {
    const path = `/v1/files/${encodeURIComponent(fileId)}/variants/${encodeURIComponent(name)}`;
    return this.retrying(() => this.call("GET", path, undefined, options.signal), options.signal);
  }

  /**
   * Many files' rendition URLs for one variant in one call (1 to 100 ids), in the order asked:
   * each entry is what `variantUrl` would have answered for that id (`rendition`, or `status`
   * and `error`). Longer lists are sent 100 at a time. The whole call is retried on 503.
   * @param {string} name @param {string[]} fileIds @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<RenditionEntry[]>}
   */
  async variantUrls(name, fileIds, options = {}) {
    const path = `/v1/files/variants/${encodeURIComponent(name)}`;
    /** @type {RenditionEntry[]} */
    const out = [];
    for (let i = 0; i < fileIds.length; i += 100) {
      const ids = fileIds.slice(i, i + 100);
      /** @type {{variant: string, files: RenditionEntry[]}} */
      const answer = await this.retrying(() => this.call("POST", path, { ids }, options.signal), options.signal);
      out.push(...answer.files);
    }
    return out;
  }

  /**
   * `attempt`, repeated on 503 (after `Retry-After`, or a backoff) up to `retries` times.
   * @template T @param {() => Promise<T>} attempt @param {AbortSignal} [signal] @returns {Promise<T>}
   */
  async retrying(attempt, signal) {
    for (let n = 0; ; n += 1) {
      try {
        return await attempt();
      } catch (e) {
        const again = e instanceof UpcommitError && e.status === 503;
        if (!again || n >= this.retries) throw e;
        await sleep(e.retryAfter ? e.retryAfter * 1000 : backoff(n, 1000, 60_000), signal);
      }
    }
  }

  /** Abort a multipart upload on the server (idempotent).
   * @param {string} uploadId */
  async abortMultipart(uploadId) {
    try {
      await this.callWithRetry("DELETE", `/v1/uploads/${uploadId}`, undefined, undefined, Date.now() + 30_000);
    } catch (e) {
      // Already gone or completed: nothing to abort.
      if (!(e instanceof UpcommitError) || ![404, 409, 410].includes(e.status)) throw e;
    }
  }

  // --- resume records ---------------------------------------------------------------------

  /** The resume record's name for a file: its name, size and lastModified, and the profile.
   * @param {File | Blob} file @param {string} profile */
  resumeKey(file, profile) {
    const f = /** @type {File} */ (file);
    return `${this.storagePrefix}${JSON.stringify([profile, f.name ?? "", file.size, f.lastModified ?? 0])}`;
  }

  /** @param {File | Blob} file @param {string} profile @returns {ResumeRecord | null} */
  resumable(file, profile) {
    if (!this.storage) return null;
    try {
      const r = JSON.parse(this.storage.getItem(this.resumeKey(file, profile)) || "null");
      return r && r.v === 1 && typeof r.upload_id === "string" && typeof r.key === "string" ? r : null;
    } catch (_) {
      return null;
    }
  }

  /** @param {File | Blob} file @param {string} profile @param {ResumeRecord} record */
  remember(file, profile, record) {
    try { this.storage?.setItem(this.resumeKey(file, profile), JSON.stringify(record)); } catch (_) { /* full or denied */ }
  }

  /** Drop a file's resume record. @param {File | Blob} file @param {string} profile */
  forget(file, profile) {
    try { this.storage?.removeItem(this.resumeKey(file, profile)); } catch (_) { /* denied */ }
  }

  // --- the upload -------------------------------------------------------------------------

  /**
   * Upload a file and commit it. Resolves with the file handle.
   * @param {File | Blob} file @param {UploadOptions} options @returns {Promise<FileHandle>}
   */
  async upload(file, options) {
    const { profile, signal } = options;
    const stage = options.onStage ?? (() => {});
    const useRecords = options.resume !== false;
    if (signal?.aborted) throw aborted();
    const method = options.method ?? (file.size > this.multipartThreshold ? "MULTIPART" : "PUT");

    const record = useRecords ? this.resumable(file, profile) : null;
    if (record) {
      const handle = await this.resume(file, options, record);
      if (handle) return handle;
    }

    stage("checksumming");
    const f = /** @type {File} */ (file);
    /** @type {PresignRequest} */
    const request = {
      profile,
      content_type: options.contentType || file.type || "application/octet-stream",
      size: file.size,
    };
    const filename = options.filename ?? f.name;
    if (filename) request.filename = filename;
    if (method === "MULTIPART") {
      request.multipart = true;
    } else {
      request.method = method;
    }
    /** @type {Checksum | null} */
    let checksum = null;
    /** @type {string[] | undefined} */
    let partChecksums;
    if (this.checksums && method !== "MULTIPART") {
      checksum = await sha256Of(file);
    }
    // Multipart: the whole file's CRC64NVME is declared at presign; each part's is computed
    // once the server has chosen the part size (a second read of the file).
    if (this.checksums && method === "MULTIPART") {
      const c = crc64nvme();
      for (let start = 0; start < file.size; start += 8 * MiB) {
        c.update(new Uint8Array(await file.slice(start, Math.min(start + 8 * MiB, file.size)).arrayBuffer()));
        if (signal?.aborted) throw aborted();
      }
      checksum = { algorithm: "CRC64NVME", value: c.base64() };
    }
    if (checksum) request.checksum = checksum;
    if (signal?.aborted) throw aborted();

    stage("presigning");
    const presigned = await this.presign(request, signal);

    if (presigned.method === "MULTIPART") {
      const mp = /** @type {{part_size: number, part_count: number}} */ (presigned.multipart);
      if (checksum) partChecksums = (await crc64nvmeParts(file, mp.part_size)).parts;
      options.onChecksum?.({ checksum, parts: partChecksums });
      /** @type {ResumeRecord} */
      const rec = {
        v: 1, upload_id: presigned.upload_id, key: presigned.key, method: "MULTIPART", size: file.size, checksum,
        filename: filename ?? null, part_size: mp.part_size, part_count: mp.part_count, saved_at: Date.now(),
      };
      // Without a checksum a resumed upload could not be proven to be this file's: no record.
      if (useRecords && checksum) this.remember(file, profile, rec);
      await this.sendParts(file, options, rec, new Map(), partChecksums);
    } else {
      options.onChecksum?.({ checksum });
      stage("uploading");
      await this.sendWhole(file, presigned, options);
      if (useRecords && checksum) {
        this.remember(file, profile, {
          v: 1, upload_id: presigned.upload_id, key: presigned.key, method: presigned.method,
          size: file.size, checksum, filename: filename ?? null, stored: true, saved_at: Date.now(),
        });
      }
    }
    return this.finish(file, options, presigned.key);
  }

  /**
   * Carry on with a recorded upload. Resolves with the handle, or null when the record is stale
   * (start afresh).
   * @param {File | Blob} file @param {UploadOptions} options @param {ResumeRecord} record
   * @returns {Promise<FileHandle | null>}
   */
  async resume(file, options, record) {
    const { profile, signal } = options;
    const stage = options.onStage ?? (() => {});
    // A record is found by the file's name, size and date (and the profile), which another
    // file can share: only the bytes prove it is the same file. Without a recorded checksum
    // nothing can, so such a record is never resumed.
    const f = /** @type {File} */ (file);
    if (!record.checksum || (record.filename ?? null) !== (options.filename ?? f.name ?? null)) {
      this.forget(file, profile);
      return null;
    }
    stage("resuming", { upload_id: record.upload_id });
    if (record.method !== "MULTIPART") {
      // The stored bytes are this file's only if its SHA-256 is the one they were stored with.
      stage("checksumming");
      const now = await sha256Of(file);
      if (signal?.aborted) throw aborted();
      if (!now || record.checksum.algorithm !== now.algorithm || record.checksum.value !== now.value) {
        this.forget(file, profile);
        return null;
      }
      // The bytes were stored; only the commit may be missing.
      try {
        return await this.finish(file, options, record.key);
      } catch (e) {
        // Unknown, expired or missing: upload afresh (`finish` dropped the record).
        if (e instanceof UpcommitError && ["upload_not_found", "upload_expired", "object_not_uploaded"].includes(e.code)) {
          return null;
        }
        throw e;
      }
    }
    /** @type {Map<number, string>} */
    const held = new Map();
    let listing;
    try {
      listing = await this.listParts(record, held, signal);
    } catch (e) {
      if (e instanceof UpcommitError && [404, 409, 410].includes(e.status)) {
        // Unknown, aborted or expired: start afresh.
        this.forget(file, profile);
        return null;
      }
      throw e;
    }
    if (listing.state === "completed") {
      options.onProgress?.({ loaded: file.size, total: file.size });
      return this.finish(file, options, record.key);
    }
    const partSize = /** @type {number} */ (record.part_size);
    /** @type {string[] | undefined} */
    let parts;
    if (record.checksum) {
      stage("checksumming");
      const sums = await crc64nvmeParts(file, partSize);
      if (sums.whole.value !== record.checksum.value) {
        // Same name, size and date, other bytes: the file is not the one being resumed.
        await this.abortMultipart(record.upload_id).catch(() => {});
        this.forget(file, profile);
        return null;
      }
      parts = sums.parts;
    }
    options.onChecksum?.({ checksum: record.checksum, parts });
    await this.sendParts(file, options, record, held, parts);
    return this.finish(file, options, record.key);
  }

  /**
   * Every part S3 holds (`GET /v1/uploads/{id}/parts`, page by page) into `held` (part → ETag),
   * keeping only parts of the expected length.
   * @param {ResumeRecord} record @param {Map<number, string>} held @param {AbortSignal} [signal]
   * @returns {Promise<PartListing>}
   */
  async listParts(record, held, signal) {
    let after = 0;
    /** @type {PartListing} */
    let page;
    const deadline = Date.now() + 120_000;
    for (;;) {
      page = await this.callWithRetry("GET", `/v1/uploads/${record.upload_id}/parts?after=${after}`, undefined, signal, deadline);
      const size = /** @type {number} */ (record.part_size);
      const count = /** @type {number} */ (record.part_count);
      for (const p of page.parts) {
        const expected = p.part_number === count ? record.size - (count - 1) * size : size;
        if (p.size === expected) held.set(p.part_number, p.etag);
      }
      if (page.next_after == null) break;
      after = page.next_after;
    }
    return page;
  }

  /** Commit, then drop the resume record. @param {File | Blob} file @param {UploadOptions} options @param {string} key */
  async finish(file, options, key) {
    const stage = options.onStage ?? (() => {});
    stage("committing");
    let handle;
    try {
      handle = await this.commit(key, { signal: options.signal });
    } catch (e) {
      // A final refusal (a 4xx) would answer the same next time: do not resume into it.
      if (e instanceof UpcommitError && e.status >= 400 && e.status < 500 && options.resume !== false) {
        this.forget(file, options.profile);
      }
      throw e;
    }
    if (options.resume !== false) this.forget(file, options.profile);
    stage("committed", { handle });
    return handle;
  }

  /**
   * One PUT or POST form to storage, with progress, retried on no answer and 5xx.
   * @param {File | Blob} file @param {Presigned} presigned @param {UploadOptions} options
   */
  async sendWhole(file, presigned, options) {
    const total = file.size;
    for (let attempt = 0; ; attempt += 1) {
      try {
        if (presigned.method === "PUT") {
          await xhrSend({
            method: "PUT",
            url: /** @type {string} */ (presigned.url),
            headers: presigned.headers || {},
            body: file,
            signal: options.signal,
            onProgress: (loaded) => options.onProgress?.({ loaded: Math.min(loaded, total), total }),
          });
        } else {
          const form = new FormData();
          for (const [k, v] of Object.entries(presigned.fields || {})) form.append(k, v);
          form.append("file", file); // the file goes last: S3 ignores fields after it
          await xhrSend({
            method: "POST",
            url: /** @type {string} */ (presigned.url),
            headers: {},
            body: form,
            signal: options.signal,
            // The form envelope adds bytes: scale to the file.
            onProgress: (loaded, sent) => options.onProgress?.({ loaded: Math.min(total, Math.round((loaded / sent) * total)), total }),
          });
        }
        options.onProgress?.({ loaded: total, total });
        return;
      } catch (e) {
        const err = /** @type {UpcommitError} */ (e);
        // A retried PUT whose first try did arrive: If-None-Match: * answers 412. Stored.
        if (attempt > 0 && presigned.method === "PUT" && err.status === 412) return;
        if (!isStorageTransient(err) || attempt >= this.retries) throw err;
        options.onRetry?.({ part_number: 0, attempt: attempt + 1, error: err });
        options.onProgress?.({ loaded: 0, total });
        await sleep(backoff(attempt, this.retryBaseMs, 30_000), options.signal);
      }
    }
  }

  /**
   * The parts not in `held`, `concurrency` at a time, each retried on its own; then the
   * completion. On abort the upload is aborted on the server and the record dropped.
   * @param {File | Blob} file @param {UploadOptions} options @param {ResumeRecord} record
   * @param {Map<number, string>} held part → ETag of the parts S3 holds
   * @param {string[] | undefined} checksums each part's CRC64NVME, when the upload declared one
   */
  async sendParts(file, options, record, held, checksums) {
    const { signal } = options;
    const stage = options.onStage ?? (() => {});
    const size = /** @type {number} */ (record.part_size);
    const count = /** @type {number} */ (record.part_count);
    const total = file.size;
    const partLength = (/** @type {number} */ n) => Math.min(n * size, total) - (n - 1) * size;
    /** @type {Map<number, number>} bytes sent of each part in flight */
    const inFlight = new Map();
    let done = 0;
    for (const n of held.keys()) done += partLength(n);
    const report = () => {
      let loaded = done;
      for (const v of inFlight.values()) loaded += v;
      options.onProgress?.({ loaded: Math.min(loaded, total), total });
    };
    report();
    stage("uploading", { upload_id: record.upload_id, held: [...held.keys()].sort((a, b) => a - b) });

    /** @type {number[]} */
    const queue = [];
    for (let n = 1; n <= count; n += 1) if (!held.has(n)) queue.push(n);
    /** @type {Map<number, PartUrl & {expires: number}>} */
    const urls = new Map();
    const deadline = () => Date.now() + 120_000;
    /** Part URLs for `numbers` (and, in the same call, the next few queued parts). */
    const fetchUrls = async (/** @type {number[]} */ numbers) => {
      const want = [...numbers];
      for (const n of queue) {
        if (want.length >= Math.max(8, this.concurrency * 2)) break;
        if (!want.includes(n) && !urls.has(n)) want.push(n);
      }
      /** @type {Record<string, unknown>} */
      const body = { part_numbers: want };
      if (checksums) body.checksums = want.map((n) => checksums[n - 1]);
      /** @type {PartUrls} */
      const answer = await this.callWithRetry("POST", `/v1/uploads/${record.upload_id}/parts`, body, signal, deadline());
      const expires = Date.parse(answer.expires_at) - 60_000;
      for (const p of answer.parts) urls.set(p.part_number, { ...p, expires });
    };
    const urlFor = async (/** @type {number} */ n, /** @type {boolean} */ fresh) => {
      const u = urls.get(n);
      if (!fresh && u && u.expires > Date.now()) return u;
      urls.delete(n);
      await fetchUrls([n]);
      return /** @type {PartUrl} */ (urls.get(n));
    };

    const internal = new AbortController();
    const onAbort = () => internal.abort();
    if (signal?.aborted) internal.abort();
    signal?.addEventListener("abort", onAbort);
    /** @type {unknown} */
    let failure = null;
    const worker = async () => {
      while (queue.length && !failure) {
        const n = /** @type {number} */ (queue.shift());
        const blob = file.slice((n - 1) * size, Math.min(n * size, total));
        let fresh = false;
        for (let attempt = 0; ; attempt += 1) {
          try {
            const part = await urlFor(n, fresh);
            inFlight.set(n, 0);
            const xhr = await xhrSend({
              method: "PUT",
              url: part.url,
              headers: part.headers || {},
              body: blob,
              signal: internal.signal,
              onProgress: (loaded) => { inFlight.set(n, loaded); report(); },
            });
            const etag = xhr.getResponseHeader("ETag");
            if (!etag) throw new UpcommitError("storage_refused", "S3's answer has no ETag (the bucket's CORS must expose it)", { status: xhr.status });
            held.set(n, etag);
            inFlight.delete(n);
            done += blob.size;
            report();
            break;
          } catch (e) {
            inFlight.delete(n);
            report();
            const err = e instanceof UpcommitError ? e : new UpcommitError("network", String(e));
            if (failure || internal.signal.aborted) return;
            // An expired URL: ask for a fresh one and try again.
            fresh = err.status === 403;
            const again = isStorageTransient(err) || fresh;
            if (!again || attempt >= this.retries) {
              failure = err;
              internal.abort();
              return;
            }
            options.onRetry?.({ part_number: n, attempt: attempt + 1, error: err });
            try {
              await sleep(backoff(attempt, this.retryBaseMs, 30_000), internal.signal);
            } catch (_) {
              return;
            }
          }
        }
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(this.concurrency, Math.max(queue.length, 1)) }, worker));
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    if (signal?.aborted) {
      await this.abortMultipart(record.upload_id).catch(() => {});
      if (options.resume !== false) this.forget(file, options.profile);
      throw aborted();
    }
    if (failure) {
      const err = /** @type {UpcommitError} */ (failure);
      if (PERMANENT_PART_FAILURES.has(err.detail)) {
        // The bytes read now are not the ones declared: this upload cannot finish.
        await this.abortMultipart(record.upload_id).catch(() => {});
        if (options.resume !== false) this.forget(file, options.profile);
      }
      // Otherwise the record stays: uploading the same file again resumes.
      throw err;
    }

    stage("completing");
    const parts = [...held.entries()].sort((a, b) => a[0] - b[0]).map(([part_number, etag]) => ({ part_number, etag }));
    try {
      await this.callWithRetry("POST", `/v1/uploads/${record.upload_id}/complete`, { parts }, signal, deadline());
    } catch (e) {
      // Aborted, or refused for good (422: a part's ETag or size, or the whole-file checksum,
      // is not what S3 holds — resuming would meet the same answer): abort it on the server.
      if (signal?.aborted || (e instanceof UpcommitError && e.status === 422)) {
        await this.abortMultipart(record.upload_id).catch(() => {});
        if (options.resume !== false) this.forget(file, options.profile);
        if (signal?.aborted) throw aborted();
      }
      throw e;
    }
  }
}

/** @param {UpcommitError} e */
function isTransient(e) {
  return e.code === "network" || e.status === 503;
}

/** A failure of a request to S3 that may succeed if repeated. @param {UpcommitError} e */
function isStorageTransient(e) {
  return e.code === "network" || e.code === "timeout" || e.status >= 500 || e.status === 429;
}

function aborted() {
  return new UpcommitError("aborted", "the upload was aborted");
}

/** Exponential backoff with jitter: base·2^attempt, capped, times 0.5–1.
 * @param {number} attempt @param {number} base @param {number} cap */
function backoff(attempt, base, cap) {
  return Math.min(cap, base * 2 ** attempt) * (0.5 + Math.random() / 2);
}

/** @param {number} ms @param {AbortSignal} [signal] @returns {Promise<void>} */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(aborted());
    const t = setTimeout(() => { signal?.removeEventListener("abort", stop); resolve(); }, ms);
    const stop = () => { clearTimeout(t); reject(aborted()); };
    signal?.addEventListener("abort", stop, { once: true });
  });
}

/**
 * One request to storage by XHR (fetch has no upload progress). Resolves with the XHR on 2xx;
 * rejects with UpcommitError: `network` (no answer), `aborted`, or `storage_refused` with S3's
 * `<Code>` as `detail`.
 * @param {{method: string, url: string, headers: Record<string, string>, body: XMLHttpRequestBodyInit,
 *   signal?: AbortSignal, onProgress?: (loaded: number, total: number) => void}} r
 * @returns {Promise<XMLHttpRequest>}
 */
function xhrSend(r) {
  return new Promise((resolve, reject) => {
    if (r.signal?.aborted) return reject(aborted());
    const xhr = new XMLHttpRequest();
    const stop = () => xhr.abort();
    r.signal?.addEventListener("abort", stop, { once: true });
    const settle = () => r.signal?.removeEventListener("abort", stop);
    xhr.upload.onprogress = (e) => r.onProgress?.(e.loaded, e.total);
    xhr.onload = () => {
      settle();
      if (xhr.status >= 200 && xhr.status < 300) return resolve(xhr);
      const m = /<Code>([^<]+)<\/Code>/.exec(xhr.responseText || "");
      reject(new UpcommitError("storage_refused", `storage answered ${xhr.status}${m ? ` ${m[1]}` : ""}`, {
        status: xhr.status,
        detail: m ? m[1] : `HTTP ${xhr.status}`,
      }));
    };
    xhr.onerror = () => { settle(); reject(new UpcommitError("network", "the connection to storage dropped")); };
    xhr.ontimeout = () => { settle(); reject(new UpcommitError("network", "storage did not answer in time")); };
    xhr.onabort = () => { settle(); reject(r.signal?.aborted ? aborted() : new UpcommitError("network", "the request to storage was cut")); };
    xhr.open(r.method, r.url);
    for (const [k, v] of Object.entries(r.headers)) {
      if (!FORBIDDEN.has(k.toLowerCase())) xhr.setRequestHeader(k, v);
    }
    xhr.send(r.body);
  });
}
